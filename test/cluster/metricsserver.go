package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/test/kubebuild"
)

// MetricsServerVersion is the release of sigs.k8s.io/metrics-server that
// StartMetricsServer runs.
const MetricsServerVersion = "v0.8.0"

// metricsServerBuild is how MetricsServerBinary builds it: from its Go
// module, cached in $HOME/.cache/speclet/metrics-server/<version>/.
func metricsServerBuild(log io.Writer) kubebuild.ModuleOptions {
	return kubebuild.ModuleOptions{
		Set: "metrics-server", Module: "sigs.k8s.io/metrics-server", Version: MetricsServerVersion,
		Programs: []string{"sigs.k8s.io/metrics-server/cmd/metrics-server"},
		LDFlags:  "-X k8s.io/client-go/pkg/version.gitVersion=" + MetricsServerVersion,
		Log:      log,
	}
}

// MetricsServerBinary returns the path of the metrics-server binary,
// building it when missing (a few minutes cold on two cores).
func MetricsServerBinary(ctx context.Context, log io.Writer) (string, error) {
	dir, err := kubebuild.BuildModule(ctx, metricsServerBuild(log))
	if err != nil {
		return "", fmt.Errorf("metrics-server %s: %w", MetricsServerVersion, err)
	}
	return filepath.Join(dir, "metrics-server"), nil
}

// MetricsServerCached reports whether MetricsServerBinary would return
// without building.
func MetricsServerCached() bool { return kubebuild.ModuleCached(metricsServerBuild(nil)) }

// MetricsServerOptions configure StartMetricsServer.
type MetricsServerOptions struct {
	// Bin is the metrics-server binary (empty: MetricsServerBinary).
	Bin string
	// Addr is the IP metrics-server serves on, and so the address of its
	// Service's endpoint, which kube-apiserver's aggregator proxies to.
	// kube-apiserver refuses loopback endpoint addresses: give the IP of a
	// HostAddr.
	Addr string
	// Resolution is --metric-resolution, how often it scrapes every node
	// (default 15s; metrics-server wants more than its 10 s kubelet request
	// timeout). `kubectl top` has numbers after two
	// scrapes.
	Resolution time.Duration
	// Args are extra flags.
	Args []string
}

// MetricsServer is a running metrics-server registered as the
// v1beta1.metrics.k8s.io APIService.
type MetricsServer struct {
	// URL is its https URL (on Options.Addr).
	URL string
	// LogPath is its log.
	LogPath string

	c *Cluster
	p *proc
}

// metricsServerName names its identity, Service and RBAC objects.
const metricsServerName = "metrics-server"

var apiServiceGVR = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// metricsAPIService is the APIService kube-apiserver aggregates.
const metricsAPIService = "v1beta1.metrics.k8s.io"

// StartMetricsServer runs metrics-server as a process of this machine the
// way its release manifests deploy it in a cluster: its own identity
// (a client certificate for user metrics-server, bound to the roles the
// manifests create: system:metrics-server, system:auth-delegator and
// extension-apiserver-authentication-reader), a serving certificate of the
// cluster CA for metrics-server.kube-system.svc, the Service
// kube-system/metrics-server with an EndpointSlice naming o.Addr, and the
// APIService v1beta1.metrics.k8s.io. It scrapes each node's
// /metrics/resource on the node's InternalIP (or Hostname) and the port
// the Node reports (daemonEndpoints), authenticated with its client
// certificate; it verifies the nodes' serving certificates with the cluster
// CA when Options.VerifyKubelets is set, else not (--kubelet-insecure-tls:
// speclet's default certificate is self-signed, as kubelet's is). It returns
// once metrics-server serves and the APIService is Available; Stop (or the
// cluster's Stop) ends it.
func (c *Cluster) StartMetricsServer(ctx context.Context, o MetricsServerOptions) (*MetricsServer, error) {
	ip := net.ParseIP(o.Addr)
	if ip == nil || ip.IsLoopback() || ip.IsUnspecified() || ip.To4() == nil {
		return nil, fmt.Errorf("start metrics-server: address %q: want an IPv4 address of this machine that is not loopback (a HostAddr's)", o.Addr)
	}
	if o.Resolution == 0 {
		o.Resolution = 15 * time.Second
	}
	if o.Bin == "" {
		var err error
		if o.Bin, err = MetricsServerBinary(ctx, c.opts.Log); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(o.Addr, "0"))
	if err != nil {
		return nil, fmt.Errorf("start metrics-server: address %s: %w", o.Addr, err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	svc := metricsServerName + "." + metav1.NamespaceSystem + ".svc"
	serving, err := c.ca.issue(pkix.Name{CommonName: svc}, true, []string{svc, svc + ".cluster.local"}, []net.IP{ip})
	if err != nil {
		return nil, err
	}
	crt, key, err := serving.write(c.Dir, "metrics-server-serving")
	if err != nil {
		return nil, err
	}
	client, err := c.ca.issue(pkix.Name{CommonName: metricsServerName}, false, nil, nil)
	if err != nil {
		return nil, err
	}
	if _, _, err := client.write(c.Dir, metricsServerName); err != nil {
		return nil, err
	}
	kc := c.path("metrics-server.kubeconfig")
	if err := c.writeKubeconfig(kc, metricsServerName); err != nil {
		return nil, err
	}
	if err := c.registerMetricsServer(ctx, o.Addr, int32(port)); err != nil {
		return nil, fmt.Errorf("start metrics-server: %w", err)
	}
	args := []string{
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--bind-address", o.Addr, "--secure-port", strconv.Itoa(port),
		"--tls-cert-file", crt, "--tls-private-key-file", key,
		"--kubelet-use-node-status-port",
		"--kubelet-preferred-address-types", "InternalIP,Hostname",
		"--metric-resolution", o.Resolution.String(),
		"--v", "2",
	}
	if c.opts.VerifyKubelets {
		args = append(args, "--kubelet-certificate-authority", c.caCrt)
	} else {
		args = append(args, "--kubelet-insecure-tls")
	}
	p, err := c.spawn("metrics-server", o.Bin, append(args, o.Args...)...)
	if err != nil {
		return nil, err
	}
	m := &MetricsServer{URL: fmt.Sprintf("https://%s", net.JoinHostPort(o.Addr, strconv.Itoa(port))), LogPath: p.log, c: c, p: p}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.ca.certPEM)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: svc}}}
	if err := c.waitHTTP(ctx, p, m.URL+"/livez", hc, 60*time.Second); err != nil {
		m.Stop()
		return nil, err
	}
	if err := c.waitAPIServiceAvailable(ctx, p, 60*time.Second); err != nil {
		m.Stop()
		return nil, err
	}
	c.logf("metrics-server %s at %s (log %s)", MetricsServerVersion, m.URL, m.LogPath)
	return m, nil
}

// Stop unregisters the APIService (so that discovery of the cluster's
// APIs does not fail on it), removes the Service and its EndpointSlice,
// and stops the process.
func (m *MetricsServer) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := m.c.unregisterMetricsServer(ctx)
	m.c.mu.Lock()
	if m.c.procs["metrics-server"] == m.p {
		delete(m.c.procs, "metrics-server")
	}
	m.c.mu.Unlock()
	if perr := m.p.stop(); err == nil {
		err = perr
	}
	return err
}

// registerMetricsServer creates (or updates) the RBAC objects, the Service
// and its EndpointSlice at addr:port, and the APIService.
func (c *Cluster) registerMetricsServer(ctx context.Context, addr string, port int32) error {
	cs, dyn, err := c.clients()
	if err != nil {
		return err
	}
	sys := metav1.NamespaceSystem
	user := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: metricsServerName}}
	roles := []*rbacv1.ClusterRole{{
		ObjectMeta: metav1.ObjectMeta{Name: "system:metrics-server"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes/metrics"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}},
		},
	}, {
		// What the release manifests aggregate into view, edit and admin.
		ObjectMeta: metav1.ObjectMeta{Name: "system:aggregated-metrics-reader", Labels: map[string]string{
			"rbac.authorization.k8s.io/aggregate-to-view": "true", "rbac.authorization.k8s.io/aggregate-to-edit": "true",
			"rbac.authorization.k8s.io/aggregate-to-admin": "true"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods", "nodes"}, Verbs: []string{"get", "list", "watch"}}},
	}}
	for _, r := range roles {
		if _, err := cs.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create clusterrole %s: %w", r.Name, err)
		}
	}
	for name, role := range map[string]string{"system:metrics-server": "system:metrics-server", "metrics-server:system:auth-delegator": "system:auth-delegator"} {
		b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: user,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create clusterrolebinding %s: %w", name, err)
		}
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-server-auth-reader", Namespace: sys}, Subjects: user,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"}}
	if _, err := cs.RbacV1().RoleBindings(sys).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create rolebinding %s/%s: %w", sys, rb.Name, err)
	}
	// A Service without a selector: its one endpoint is the EndpointSlice
	// below, managed here (no controller rewrites it).
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServerName, Namespace: sys},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(port)}}},
	}
	if _, err := cs.CoreV1().Services(sys).Create(ctx, service, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service %s/%s: %w", sys, service.Name, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: metricsServerName, Namespace: sys, Labels: map[string]string{
			discoveryv1.LabelServiceName: metricsServerName, discoveryv1.LabelManagedBy: "speclet.test-cluster"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if old, err := cs.DiscoveryV1().EndpointSlices(sys).Get(ctx, slice.Name, metav1.GetOptions{}); err == nil {
		slice.ResourceVersion = old.ResourceVersion
		_, err = cs.DiscoveryV1().EndpointSlices(sys).Update(ctx, slice, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update endpointslice %s/%s: %w", sys, slice.Name, err)
		}
	} else if _, err := cs.DiscoveryV1().EndpointSlices(sys).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create endpointslice %s/%s: %w", sys, slice.Name, err)
	}
	as := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": metricsAPIService},
		"spec": map[string]any{
			"group": "metrics.k8s.io", "version": "v1beta1",
			"service":  map[string]any{"namespace": sys, "name": metricsServerName, "port": int64(443)},
			"caBundle": base64.StdEncoding.EncodeToString(c.ca.certPEM),
			// The release manifests' priorities.
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
		},
	}}
	api := dyn.Resource(apiServiceGVR)
	if old, err := api.Get(ctx, metricsAPIService, metav1.GetOptions{}); err == nil {
		as.SetResourceVersion(old.GetResourceVersion())
		if _, err := api.Update(ctx, as, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update apiservice %s: %w", metricsAPIService, err)
		}
	} else if _, err := api.Create(ctx, as, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create apiservice %s: %w", metricsAPIService, err)
	}
	return nil
}

// unregisterMetricsServer deletes the APIService, the Service and the
// EndpointSlice (each if present); the RBAC objects stay, as a release
// manifest's would after a restart.
func (c *Cluster) unregisterMetricsServer(ctx context.Context) error {
	cs, dyn, err := c.clients()
	if err != nil {
		return err
	}
	sys := metav1.NamespaceSystem
	for what, del := range map[string]func() error{
		"apiservice " + metricsAPIService: func() error {
			return dyn.Resource(apiServiceGVR).Delete(ctx, metricsAPIService, metav1.DeleteOptions{})
		},
		"endpointslice": func() error {
			return cs.DiscoveryV1().EndpointSlices(sys).Delete(ctx, metricsServerName, metav1.DeleteOptions{})
		},
		"service": func() error { return cs.CoreV1().Services(sys).Delete(ctx, metricsServerName, metav1.DeleteOptions{}) },
	} {
		if err := del(); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("stop metrics-server: delete %s: %w", what, err)
		}
	}
	return nil
}

// waitAPIServiceAvailable polls the APIService until kube-apiserver
// reports it Available (its aggregator reached metrics-server's
// discovery through the Service's endpoint with the front proxy's
// certificate), p exits, or timeout passes.
func (c *Cluster) waitAPIServiceAvailable(ctx context.Context, p *proc, timeout time.Duration) error {
	_, dyn, err := c.clients()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	last := "not read yet"
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("metrics-server exited: %v; log %s:\n%s", p.cmd.ProcessState, p.log, p.tail())
		}
		as, err := dyn.Resource(apiServiceGVR).Get(ctx, metricsAPIService, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
		} else {
			conds, _, _ := unstructured.NestedSlice(as.Object, "status", "conditions")
			for _, cd := range conds {
				m, _ := cd.(map[string]any)
				if m["type"] == "Available" {
					if m["status"] == "True" {
						return nil
					}
					last = fmt.Sprintf("Available=%v: %v: %v", m["status"], m["reason"], m["message"])
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("apiservice %s not Available after %s: %s; metrics-server log %s:\n%s", metricsAPIService, timeout, last, p.log, p.tail())
}

// clients returns an admin clientset and dynamic client.
func (c *Cluster) clients() (*kubernetes.Clientset, dynamic.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.admin)
	if err != nil {
		return nil, nil, fmt.Errorf("load kubeconfig %s: %w", c.admin, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	return cs, dyn, err
}
