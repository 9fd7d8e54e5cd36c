// Package cluster runs a real Kubernetes control plane on 127.0.0.1 for
// tests, benchmarks and `make cluster`: Debian's etcd-server, kube-apiserver
// and, on request, kube-scheduler and kube-controller-manager, built from the
// Go module k8s.io/kubernetes (test/kubebuild) and cached outside the
// repository in $HOME/.cache/speclet/kube/<version>/.
//
// Contracts:
//   - Start generates a CA, the API server's serving certificate (127.0.0.1,
//     localhost, kubernetes.default...), an admin client certificate
//     (O=system:masters) and the service account signing key, and runs the
//     API server with client-certificate authentication, the Node and RBAC
//     authorizers and the NodeRestriction admission plugin. It returns once
//     /readyz answers and the bootstrap objects exist.
//   - NodeKubeconfig(name) writes a kubeconfig whose client certificate is
//     CN=system:node:<name>, O=system:nodes: a node agent gets exactly the
//     rights the Node authorizer and NodeRestriction give a kubelet, never
//     cluster-admin.
//   - Without a controller-manager nothing creates a namespace's `default`
//     ServiceAccount or its `kube-root-ca.crt` ConfigMap; Start creates them
//     in "default" and EnsureNamespace in any other namespace.
//   - Stop kills every process it started and removes the directory it
//     created. A killed test binary's processes die with it (Pdeathsig).
//   - ForTest skips when etcd-server or the binaries are missing outside CI;
//     with CI=true it builds the binaries (minutes when cold) and fails on
//     any error. At the test's end it fails listing any process, mount or
//     directory left (harness.CheckLeaks).
//   - NodeForTest tears its node down as the cluster command does (node,
//     runtime, Remove) and fails the test if anything of it is left.
//
// # Usage
//
//	c := cluster.ForTest(t, cluster.Options{})          // stopped in t.Cleanup
//	admin := c.AdminKubeconfig()                         // path
//	kc, err := c.NodeKubeconfig("node-a")               // path, system:node:node-a
//	cs := c.Client(t)                                    // admin clientset
//	crt, key := c.CA()                                   // PEM paths
//	err = c.RestartAPIServer(ctx)                        // same port, same etcd
//
// Outside tests: cluster.Start(ctx, cluster.Options{Log: os.Stderr}), then
// defer c.Stop(). Binaries(ctx, version, log) returns (and builds) the
// directory holding kube-apiserver, kube-scheduler, kube-controller-manager
// and kubectl.
package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"

	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/kubebuild"
)

// DefaultVersion is the k8s.io/kubernetes release the control plane runs.
const DefaultVersion = "v1.34.4"

// Commands are the k8s.io/kubernetes commands the harness builds.
var Commands = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"}

// EtcdPath is where Debian's etcd-server installs etcd.
const EtcdPath = "/usr/bin/etcd"

// frontProxyClient is the common name of the aggregator's client
// certificate (--requestheader-allowed-names).
const frontProxyClient = "front-proxy-client"

// ServiceCIDR is the API server's service cluster IP range.
const ServiceCIDR = "10.96.0.0/24"

// Options configure Start.
type Options struct {
	// Version of k8s.io/kubernetes (default DefaultVersion).
	Version string
	// BinDir holds the binaries; empty: Binaries(Version) builds or finds them.
	BinDir string
	// Dir is the working directory (certs, kubeconfigs, etcd data, logs);
	// empty: a new temporary directory that Stop removes.
	Dir string
	// Scheduler and ControllerManager also run kube-scheduler and
	// kube-controller-manager. The controller-manager signs approved
	// CertificateSigningRequests with the cluster CA.
	Scheduler, ControllerManager bool
	// VerifyKubelets makes the API server verify the kubelets' serving
	// certificates against the cluster CA (--kubelet-certificate-authority)
	// when it proxies logs, exec and port-forward: nodes then need a
	// certificate the cluster issued (speclet --rotate-server-certificates).
	VerifyKubelets bool
	// AuditPolicy, when set, is the API server's audit policy (YAML); the
	// events go to AuditLog() as JSON lines.
	AuditPolicy string
	// HollowNodes issues static bearer tokens (--token-auth-file) for
	// system:node:hollow-0 .. hollow-<HollowNodes-1> in group system:nodes,
	// for `speclet hollow` (hollow.go).
	HollowNodes int
	// ControlPlaneQPS, when set, is the scheduler's and the
	// controller-manager's --kube-api-qps (burst twice as much) instead of
	// their defaults (50 and 20 per second): scale benchmarks that create
	// thousands of pods measure the nodes, not those client limits.
	ControlPlaneQPS int
	// DisableAdmission are admission plugins the API server runs without
	// (--disable-admission-plugins), such as the node e2e jobs' API server
	// has: ServiceAccount (pods get no service account token volume) and
	// TaintNodesByCondition.
	DisableAdmission []string
	// Log receives progress lines (nil: discard).
	Log io.Writer
}

// Cluster is a running control plane.
type Cluster struct {
	// URL is the API server's https URL on 127.0.0.1.
	URL string
	// Dir holds certificates, kubeconfigs, etcd data and each process's log.
	Dir string
	// BinDir holds the control-plane binaries (kubectl included).
	BinDir string

	opts     Options
	ownDir   bool
	ca       *ca
	caCrt    string
	caKey    string
	admin    string
	apiPort  int
	etcdURL  string
	mu       sync.Mutex
	procs    map[string]*proc
	nodeKCs  map[string]string
	nsCreate sync.Mutex

	// leaks is ForTest's check; each node's and hollow process's Dir joins
	// it (nothing mounted or running under it at the test's end).
	leaks *harness.Leaks
}

// Binaries returns the directory holding the control-plane binaries of
// version, building the missing ones (minutes when cold).
func Binaries(ctx context.Context, version string, log io.Writer) (string, error) {
	if version == "" {
		version = DefaultVersion
	}
	return kubebuild.Build(ctx, kubebuild.Options{Set: "kube", Version: version, Commands: Commands, Log: log})
}

// BinariesCached reports whether Binaries would return without building.
func BinariesCached(version string) bool {
	if version == "" {
		version = DefaultVersion
	}
	return kubebuild.Cached(kubebuild.Options{Set: "kube", Version: version, Commands: Commands})
}

// cached reports whether the binaries o runs are built.
func (o Options) cached() bool {
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	cmds := []string{"kube-apiserver"}
	if o.Scheduler {
		cmds = append(cmds, "kube-scheduler")
	}
	if o.ControllerManager {
		cmds = append(cmds, "kube-controller-manager")
	}
	return kubebuild.Cached(kubebuild.Options{Set: "kube", Version: o.Version, Commands: cmds})
}

func (c *Cluster) logf(format string, args ...any) {
	if c.opts.Log != nil {
		fmt.Fprintf(c.opts.Log, "cluster: "+format+"\n", args...)
	}
}

// Start runs etcd and kube-apiserver (and the scheduler and controller-manager
// when asked) and returns once the API server is ready. On error nothing is
// left running.
func Start(ctx context.Context, o Options) (res *Cluster, err error) {
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if _, err := os.Stat(EtcdPath); err != nil {
		return nil, fmt.Errorf("start cluster: %s missing (Debian package etcd-server): %w", EtcdPath, err)
	}
	c := &Cluster{opts: o, procs: map[string]*proc{}, nodeKCs: map[string]string{}}
	if o.BinDir == "" && o.cached() {
		o.BinDir, _ = kubebuild.Dir("kube", o.Version)
		c.opts.BinDir = o.BinDir
	}
	if o.BinDir == "" {
		if o.BinDir, err = Binaries(ctx, o.Version, o.Log); err != nil {
			return nil, fmt.Errorf("start cluster: %w", err)
		}
		c.opts.BinDir = o.BinDir
	}
	c.BinDir = o.BinDir
	c.Dir = o.Dir
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "speclet-cluster-"); err != nil {
			return nil, err
		}
		c.ownDir = true
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if err := c.writeCerts(); err != nil {
		return nil, fmt.Errorf("start cluster: certificates: %w", err)
	}
	if err := c.startEtcd(ctx); err != nil {
		return nil, err
	}
	if c.apiPort, err = freePort(); err != nil {
		return nil, err
	}
	c.URL = fmt.Sprintf("https://127.0.0.1:%d", c.apiPort)
	if err := c.writeKubeconfig(c.admin, "admin"); err != nil {
		return nil, err
	}
	if o.AuditPolicy != "" {
		if err := os.WriteFile(c.path("audit-policy.yaml"), []byte(o.AuditPolicy), 0o644); err != nil {
			return nil, err
		}
	}
	if err := c.writeHollowTokens(); err != nil {
		return nil, err
	}
	if err := c.startAPIServer(ctx); err != nil {
		return nil, err
	}
	if err := c.EnsureNamespace(ctx, metav1.NamespaceDefault); err != nil {
		return nil, fmt.Errorf("start cluster: bootstrap: %w", err)
	}
	if o.Scheduler {
		if err := c.startScheduler(); err != nil {
			return nil, err
		}
	}
	if o.ControllerManager {
		if err := c.startControllerManager(); err != nil {
			return nil, err
		}
	}
	c.logf("API server ready at %s (dir %s)", c.URL, c.Dir)
	return c, nil
}

func (c *Cluster) path(name string) string { return filepath.Join(c.Dir, name) }

func (c *Cluster) writeCerts() error {
	var err error
	if c.ca, err = newCA(); err != nil {
		return err
	}
	c.caCrt, c.caKey = c.path("ca.crt"), c.path("ca.key")
	if err := os.WriteFile(c.caCrt, c.ca.certPEM, 0o644); err != nil {
		return err
	}
	kp, err := c.ca.keyPEM()
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.caKey, kp, 0o600); err != nil {
		return err
	}
	serving, err := c.ca.issue(pkix.Name{CommonName: "kube-apiserver"}, true,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")})
	if err != nil {
		return err
	}
	if _, _, err := serving.write(c.Dir, "apiserver"); err != nil {
		return err
	}
	clients := map[string]pkix.Name{
		"admin":                   {CommonName: "admin", Organization: []string{"system:masters"}},
		"apiserver-kubelet":       {CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		"kube-scheduler":          {CommonName: "system:kube-scheduler"},
		"kube-controller-manager": {CommonName: "system:kube-controller-manager"},
	}
	for name, subj := range clients {
		kp, err := c.ca.issue(subj, false, nil, nil)
		if err != nil {
			return err
		}
		if _, _, err := kp.write(c.Dir, name); err != nil {
			return err
		}
	}
	// The front proxy's CA and client: kube-apiserver's aggregator proxies
	// to an aggregated API server (metrics-server) with this client
	// certificate, which that server trusts through the
	// extension-apiserver-authentication ConfigMap. A CA of its own, as
	// kubeadm makes, so that no other certificate passes as the proxy.
	fp, err := newCA()
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.path("front-proxy-ca.crt"), fp.certPEM, 0o644); err != nil {
		return err
	}
	fpc, err := fp.issue(pkix.Name{CommonName: frontProxyClient}, false, nil, nil)
	if err != nil {
		return err
	}
	if _, _, err := fpc.write(c.Dir, "front-proxy-client"); err != nil {
		return err
	}
	c.admin = c.path("admin.kubeconfig")
	return serviceAccountKey(c.path("sa.key"))
}

// writeKubeconfig writes a kubeconfig at path using the client certificate
// c.Dir/<cert>.crt.
func (c *Cluster) writeKubeconfig(path, cert string) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: speclet
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: speclet
  context:
    cluster: speclet
    user: %s
current-context: speclet
`, c.URL, c.caCrt, cert, c.path(cert+".crt"), c.path(cert+".key"), cert)
	return os.WriteFile(path, []byte(kc), 0o600)
}

// AdminKubeconfig is the path of a kubeconfig with cluster-admin rights
// (O=system:masters).
func (c *Cluster) AdminKubeconfig() string { return c.admin }

// CA returns the PEM paths of the cluster CA's certificate and key.
func (c *Cluster) CA() (certPEM, keyPEM string) { return c.caCrt, c.caKey }

// NodeKubeconfig writes (once) and returns a kubeconfig for node name: its
// client certificate is CN=system:node:<name>, O=system:nodes.
func (c *Cluster) NodeKubeconfig(name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.nodeKCs[name]; ok {
		return p, nil
	}
	kp, err := c.ca.issue(pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}}, false, nil, nil)
	if err != nil {
		return "", err
	}
	cert := "node-" + name
	if _, _, err := kp.write(c.Dir, cert); err != nil {
		return "", err
	}
	p := c.path(cert + ".kubeconfig")
	if err := c.writeKubeconfig(p, cert); err != nil {
		return "", err
	}
	c.nodeKCs[name] = p
	return p, nil
}

// Clientset returns a clientset for the kubeconfig at path.
func Clientset(path string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", path, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return kubernetes.NewForConfig(cfg)
}

// AdminClient returns a cluster-admin clientset.
func (c *Cluster) AdminClient() (*kubernetes.Clientset, error) { return Clientset(c.admin) }

// EnsureNamespace creates namespace ns if missing, its `default`
// ServiceAccount and its `kube-root-ca.crt` ConfigMap (what
// kube-controller-manager creates, when it runs, a little later).
func (c *Cluster) EnsureNamespace(ctx context.Context, ns string) error {
	c.nsCreate.Lock()
	defer c.nsCreate.Unlock()
	cs, err := c.AdminClient()
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	// With a controller-manager these appear on their own, but not at once:
	// creating them avoids the race (AlreadyExists is fine).
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create serviceaccount %s/default: %w", ns, err)
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"},
		Data:       map[string]string{"ca.crt": string(c.ca.certPEM)},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create configmap %s/kube-root-ca.crt: %w", ns, err)
	}
	return nil
}

// proc is one control-plane process.
type proc struct {
	name  string
	cmd   *exec.Cmd
	log   string
	done  chan struct{}
	grace time.Duration // from SIGTERM to SIGKILL in stop; 0: 10 s
}

// startProc starts bin in a process group of its own (so that a terminal's
// Ctrl-C reaches it only through its owner), killed with the test process,
// its output appended to logPath.
func startProc(name, logPath, bin string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { cmd.Wait(); f.Close(); close(p.done) }()
	return p, nil
}

func (c *Cluster) spawn(name, bin string, args ...string) (*proc, error) {
	p, err := startProc(name, c.path(name+".log"), bin, args...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.procs[name] = p
	c.mu.Unlock()
	c.logf("started %s (pid %d), log %s", name, p.cmd.Process.Pid, p.log)
	return p, nil
}

// stop sends SIGTERM to the process group and waits; after the grace
// period it kills the group and says so.
func (p *proc) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	grace := p.grace
	if grace == 0 {
		grace = 10 * time.Second
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not exit within %s of SIGTERM", p.name, grace)
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) tail() string { return TailFile(p.log, 15) }

// TailFile returns the last n lines of the file at path ("" when it cannot
// be read): what a test prints of a process's log when it fails.
func TailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	cp, err := freePort()
	if err != nil {
		return err
	}
	pp, err := freePort()
	if err != nil {
		return err
	}
	c.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", cp)
	peer := fmt.Sprintf("http://127.0.0.1:%d", pp)
	p, err := c.spawn("etcd", EtcdPath,
		"--name", "speclet", "--data-dir", c.path("etcd"),
		"--listen-client-urls", c.etcdURL, "--advertise-client-urls", c.etcdURL,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "speclet="+peer, "--log-level", "warn")
	if err != nil {
		return err
	}
	return c.waitHTTP(ctx, p, c.etcdURL+"/health", nil, 30*time.Second)
}

func (c *Cluster) apiServerArgs() []string {
	args := []string{
		"--etcd-servers", c.etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(c.apiPort),
		"--cert-dir", c.path("apiserver-certs"),
		"--tls-cert-file", c.path("apiserver.crt"), "--tls-private-key-file", c.path("apiserver.key"),
		"--client-ca-file", c.caCrt,
		"--service-account-key-file", c.path("sa.key"),
		"--service-account-signing-key-file", c.path("sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--api-audiences", "https://kubernetes.default.svc.cluster.local",
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		"--service-cluster-ip-range", ServiceCIDR,
		"--kubelet-client-certificate", c.path("apiserver-kubelet.crt"),
		"--kubelet-client-key", c.path("apiserver-kubelet.key"),
		"--kubelet-preferred-address-types", "InternalIP,Hostname",
		"--allow-privileged=true",
		"--profiling=false",
		// The aggregation layer (metrics-server's metrics.k8s.io): the
		// front proxy's client certificate and the headers it sets; the
		// aggregator routes to an APIService's endpoints, not to its
		// Service's cluster IP (no service proxy runs on this machine).
		"--requestheader-client-ca-file", c.path("front-proxy-ca.crt"),
		"--requestheader-allowed-names", frontProxyClient,
		"--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", c.path("front-proxy-client.crt"),
		"--proxy-client-key-file", c.path("front-proxy-client.key"),
		"--enable-aggregator-routing=true",
	}
	args = append(args, c.hollowArgs()...)
	if len(c.opts.DisableAdmission) > 0 {
		args = append(args, "--disable-admission-plugins", strings.Join(c.opts.DisableAdmission, ","))
	}
	if c.opts.VerifyKubelets {
		args = append(args, "--kubelet-certificate-authority", c.caCrt)
	}
	if c.opts.AuditPolicy != "" {
		args = append(args, "--audit-policy-file", c.path("audit-policy.yaml"), "--audit-log-path", c.AuditLog(),
			"--audit-log-format", "json", "--audit-log-maxsize", "0")
	}
	return args
}

// AuditLog is the API server's audit log (Options.AuditPolicy).
func (c *Cluster) AuditLog() string { return c.path("audit.log") }

func (c *Cluster) startAPIServer(ctx context.Context) error {
	p, err := c.spawn("kube-apiserver", filepath.Join(c.BinDir, "kube-apiserver"), c.apiServerArgs()...)
	if err != nil {
		return err
	}
	hc, err := c.adminHTTP()
	if err != nil {
		return err
	}
	return c.waitHTTP(ctx, p, c.URL+"/readyz", hc, 90*time.Second)
}

// RestartAPIServer stops kube-apiserver and starts it again on the same port
// against the same etcd; it returns once the new one is ready.
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	p := c.procs["kube-apiserver"]
	c.mu.Unlock()
	if p != nil {
		p.stop()
	}
	return c.startAPIServer(ctx)
}

// StopAPIServer stops kube-apiserver only (StartAPIServer brings it back).
func (c *Cluster) StopAPIServer() {
	c.mu.Lock()
	p := c.procs["kube-apiserver"]
	c.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// StartAPIServer starts a stopped kube-apiserver again on its port.
func (c *Cluster) StartAPIServer(ctx context.Context) error { return c.startAPIServer(ctx) }

func (c *Cluster) adminHTTP() (*http.Client, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.ca.certPEM)
	cert, err := tls.LoadX509KeyPair(c.path("admin.crt"), c.path("admin.key"))
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}, nil
}

// waitHTTP polls url until it answers 200 OK, p exits, or timeout passes.
func (c *Cluster) waitHTTP(ctx context.Context, p *proc, url string, hc *http.Client, timeout time.Duration) error {
	if hc == nil {
		hc = &http.Client{Timeout: 2 * time.Second}
	}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited during start: %v; log %s:\n%s", p.name, p.cmd.ProcessState, p.log, p.tail())
		}
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s answered %s", url, resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %s: %v; log %s:\n%s", p.name, timeout, last, p.log, p.tail())
}

func (c *Cluster) startScheduler() error {
	kc := c.path("kube-scheduler.kubeconfig")
	if err := c.writeKubeconfig(kc, "kube-scheduler"); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	_, err = c.spawn("kube-scheduler", filepath.Join(c.BinDir, "kube-scheduler"), append([]string{
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--cert-dir", c.path("scheduler-certs")}, c.qpsArgs()...)...)
	return err
}

// startControllerManager runs kube-controller-manager with the admin
// identity (the harness does not set up per-controller service account
// credentials); its csrsigning controller signs with the cluster CA.
func (c *Cluster) startControllerManager() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	_, err = c.spawn("kube-controller-manager", filepath.Join(c.BinDir, "kube-controller-manager"), append([]string{
		"--kubeconfig", c.admin, "--authentication-kubeconfig", c.admin, "--authorization-kubeconfig", c.admin,
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--cert-dir", c.path("controller-manager-certs"),
		"--root-ca-file", c.caCrt, "--service-account-private-key-file", c.path("sa.key"),
		"--service-cluster-ip-range", ServiceCIDR, "--controllers", "*,-nodeipam",
		"--cluster-signing-cert-file", c.caCrt, "--cluster-signing-key-file", c.caKey}, c.qpsArgs()...)...)
	return err
}

// Stop kills every process (the API server first) and removes the directory
// when Start created it. It is idempotent.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	procs := c.procs
	c.procs = map[string]*proc{}
	c.mu.Unlock()
	for _, name := range []string{"metrics-server", "kube-controller-manager", "kube-scheduler", "kube-apiserver", "etcd"} {
		if p := procs[name]; p != nil {
			p.stop()
		}
	}
	if c.ownDir && c.Dir != "" {
		if err := os.RemoveAll(c.Dir); err != nil {
			return fmt.Errorf("stop cluster: remove %s: %w", c.Dir, err)
		}
	}
	return nil
}

// ForTest starts a cluster stopped in t.Cleanup, which then fails t,
// listing what is left, if a process the test started since (the control
// plane's, and any other), or anything of the cluster's Dir, is left
// (harness.CheckLeaks). Outside CI it skips when
// etcd-server is missing or the binaries are not built yet (build them with
// `go run ./test/cluster/cmd/buildkube`); with CI=true it builds them and
// fails on any error.
func ForTest(t testing.TB, o Options) *Cluster {
	t.Helper()
	ci := os.Getenv("CI") == "true"
	if _, err := os.Stat(EtcdPath); err != nil {
		if ci {
			t.Fatalf("cluster: %s missing (Debian package etcd-server; make deps installs it)", EtcdPath)
		}
		t.Skipf("cluster: %s missing (Debian package etcd-server; make deps installs it)", EtcdPath)
	}
	if o.BinDir == "" && !o.cached() && !ci {
		t.Skip("cluster: control-plane binaries not built; run `go run ./test/cluster/cmd/buildkube` (minutes when cold) or set CI=true")
	}
	if o.Log == nil {
		o.Log = testWriter{t}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	leaks := harness.CheckLeaks(t)
	c, err := Start(ctx, o)
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	if o.Dir == "" {
		leaks.Gone(c.Dir)
	} else {
		leaks.Clean(c.Dir)
	}
	c.mu.Lock()
	c.leaks = leaks
	c.mu.Unlock()
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("cluster: %v", err)
		}
	})
	return c
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// watch adds dir, where a node or hollow process of c lives, to ForTest's
// check: a test that leaves a mount or process under it fails listing it.
func (c *Cluster) watch(dir string) {
	c.mu.Lock()
	l := c.leaks
	c.mu.Unlock()
	if l != nil && dir != "" {
		l.Clean(dir)
	}
}
