package nodee2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/cluster"
	nc "github.com/speclet/speclet/test/nodeconformance"
)

// Agents a run can put on its node.
const (
	Speclet = nc.Speclet
	Kubelet = nc.Kubelet
)

// Label filters of the two passes: the parallel one and the [Serial] one.
const (
	LabelFilter       = `NodeConformance && !Serial && !Disruptive && !Flaky`
	SerialLabelFilter = `NodeConformance && Serial && !Disruptive && !Flaky`
)

// Ports the node agent serves on, kubelet's defaults: the suite reads the
// kubelet API through the API server's node proxy at the node's address,
// some specs probe healthz at 127.0.0.1:10248 directly, and ContainerMetrics
// reads the read-only port at localhost:10255: both agents serve it on
// the node's address (kubelet on its --address) and the run forwards
// loopback's 10255 to it (loopbackForward).
const (
	APIPort      = 10250
	ReadOnlyPort = 10255
	HealthzPort  = 10248
)

// ClusterDomain is the cluster's DNS domain, given to the suite
// (--dns-domain) and to the node agent.
const ClusterDomain = "cluster.local"

// Options configure one pass of the suite on one agent.
type Options struct {
	// Agent is Speclet or Kubelet.
	Agent string
	// Bins are the suite's binaries (nodeconformance.BuildBinaries);
	// E2ENode runs.
	Bins nc.Binaries
	// Registry serves the images (nodeconformance.PushImages done).
	Registry *harness.Registry
	// SpecletBin (Agent Speclet) and KubeletBin (Agent Kubelet).
	SpecletBin, KubeletBin string
	// Version of the control plane (default nodeconformance.DefaultVersion).
	Version string
	// Serial runs the [Serial] [NodeConformance] specs, one at a time;
	// otherwise the others, Procs at a time.
	Serial bool
	// Procs is how many Ginkgo processes run specs in parallel (default 4;
	// 1 when Serial).
	Procs int
	// Focus, when set, keeps only the specs whose full name it matches.
	Focus string
	// FocusFile, when set, keeps only the specs of the files it matches
	// (Ginkgo's --focus-file; test/e2e_node/: the suite's own specs, not
	// those of test/e2e/common).
	FocusFile string
	// Out receives junit.xml, report.json, ginkgo.log and every log.
	Out string
	// Timeout bounds the Ginkgo run (default 90 minutes).
	Timeout time.Duration
	Log     io.Writer
}

func (o *Options) defaults() {
	if o.Version == "" {
		o.Version = nc.DefaultVersion
	}
	if o.Procs <= 0 {
		o.Procs = 4
	}
	if o.Serial {
		o.Procs = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 90 * time.Minute
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// NodeName is the node's name for agent.
func NodeName(agent string) string { return "ne2e-" + agent }

// Run starts a control plane (scheduler and controller-manager included),
// an address for the node (NewNodeAddr), a containerd pulling from
// o.Registry and one node of o.Agent serving its API on that address,
// runs e2e_node.test against it as the node e2e jobs do with a node of
// their own (--start-services=false: the suite drives an agent that runs),
// and stops and removes everything it started, whatever happens. Spec
// failures are not errors; an error means the pass itself failed; when
// Ginkgo still reported, the Result comes with the error.
func Run(ctx context.Context, o Options) (res *nc.Result, err error) {
	o.defaults()
	start := time.Now()
	logf := func(format string, a ...any) {
		fmt.Fprintf(o.Log, "node-e2e %s: "+format+"\n", append([]any{o.Agent}, a...)...)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("node e2e %s: %w", o.Agent, err)
	}
	if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(HealthzPort))); err != nil {
		return nil, fmt.Errorf("node e2e %s: the agent's healthz port 127.0.0.1:%d is taken (another kubelet?): %w", o.Agent, HealthzPort, err)
	} else {
		l.Close()
	}
	work, err := os.MkdirTemp("", "speclet-nodee2e-")
	if err != nil {
		return nil, fmt.Errorf("node e2e %s: %w", o.Agent, err)
	}
	var cleanups []func()
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		mounts := harness.Mounts(work)
		for i := len(mounts) - 1; i >= 0; i-- {
			syscall.Unmount(mounts[i], syscall.MNT_DETACH)
		}
		if rmErr := os.RemoveAll(work); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("node e2e %s: remove %s: %w", o.Agent, work, rmErr))
		}
	}()

	addr, err := NewNodeAddr()
	if err != nil {
		return nil, fmt.Errorf("node e2e %s: %w", o.Agent, err)
	}
	cleanups = append(cleanups, func() {
		if rmErr := addr.Remove(); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
	})
	logf("node address %s on %s (peer %s in netns %s)", addr.IP, addr.Link, addr.Peer, addr.Netns)

	// The API server of the node e2e jobs (e2e_node's services/apiserver.go)
	// runs without the ServiceAccount and TaintNodesByCondition admission
	// plugins: the suite's pods get no service account token volume (the
	// Summary API spec lists every volume of its pods).
	c, err := cluster.Start(ctx, cluster.Options{Version: o.Version, Dir: filepath.Join(work, "cluster"), Scheduler: true, ControllerManager: true,
		DisableAdmission: []string{"ServiceAccount", "TaintNodesByCondition"}, Log: o.Log})
	if err != nil {
		return nil, fmt.Errorf("node e2e %s: %w", o.Agent, err)
	}
	cleanups = append(cleanups, func() {
		copyLogs(filepath.Join(work, "cluster"), filepath.Join(o.Out, "logs", "control-plane"), "*.log")
		c.Stop()
	})
	admin, err := c.AdminClient()
	if err != nil {
		return nil, fmt.Errorf("node e2e %s: %w", o.Agent, err)
	}
	name := NodeName(o.Agent)
	cd, err := harness.StartContainerd(ctx, harness.Options{Registry: o.Registry, Log: o.Log})
	if err != nil {
		return nil, fmt.Errorf("node e2e %s: containerd: %w", o.Agent, err)
	}
	cleanups = append(cleanups, func() {
		copyFile(cd.LogPath(), filepath.Join(o.Out, "logs", name, "containerd.log"))
		if err := cd.Stop(); err != nil {
			logf("stop containerd: %v", err)
		}
	})
	restore, err := placeRuntime(cd.PID())
	if err != nil {
		return nil, fmt.Errorf("node e2e %s: %w", o.Agent, err)
	}
	cleanups = append(cleanups, func() {
		if err := restore(); err != nil {
			logf("put the system cgroups back: %v", err)
		}
	})
	dir := filepath.Join(work, name)
	manifests := filepath.Join(dir, "manifests")
	switch o.Agent {
	case Speclet:
		// As on the node conformance nodes: kubelet's back-off and kubelet's
		// log layout (the suite reads /var/log/pods and /var/log/containers);
		// the device plugins' directory where kubelet's is (the Device Plugin
		// specs' plugins dial /var/lib/kubelet/device-plugins/kubelet.sock);
		// the read-only port on the node's address, as kubelet serves it
		// (with --kubeconfig speclet serves it on 127.0.0.1 unless told;
		// ContainerMetrics reads it at localhost:10255, forwarded).
		args := []string{"--crashloop-backoff-base", "10s",
			"--pod-logs-dir", "/var/log/pods", "--container-log-links-dir", "/var/log/containers",
			"--device-plugins-dir", "/var/lib/kubelet/device-plugins",
			"--node-ip", addr.IP, "--address", addr.IP, "--port", strconv.Itoa(APIPort),
			"--healthz-port", strconv.Itoa(HealthzPort), "--cluster-domain", ClusterDomain,
			"--kubelet-cgroups", KubeletCgroup, "--runtime-cgroups", RuntimeCgroup, "--system-cgroups", SystemCgroup}
		n, err := c.StartNode(ctx, cluster.NodeOptions{Name: name, Bin: o.SpecletBin, Containerd: cd, Dir: dir, Args: args,
			ReadOnly: net.JoinHostPort(addr.IP, strconv.Itoa(ReadOnlyPort))})
		if err != nil {
			return nil, fmt.Errorf("node e2e %s: %w", o.Agent, err)
		}
		manifests = n.Manifests
		cleanups = append(cleanups, func() {
			if err := n.Stop(); err != nil {
				logf("%v", err)
			}
			copyFile(n.LogPath, filepath.Join(o.Out, "logs", name, "speclet.log"))
		})
	case Kubelet:
		if err := os.MkdirAll(manifests, 0o755); err != nil {
			return nil, err
		}
		k, err := c.StartKubelet(cluster.KubeletOptions{Name: name, Bin: o.KubeletBin, Containerd: cd, Dir: dir, NodeIP: addr.IP,
			Args: []string{"--node-ip", addr.IP, "--runtime-cgroups", RuntimeCgroup},
			Config: map[string]any{
				"address": addr.IP, "port": APIPort, "readOnlyPort": ReadOnlyPort, "healthzPort": HealthzPort,
				"staticPodPath": manifests, "podLogsDir": "/var/log/pods", "clusterDomain": ClusterDomain,
				"kubeletCgroups": KubeletCgroup, "systemCgroups": SystemCgroup, "cgroupRoot": "/", // kubelet wants cgroupRoot with systemCgroups
			}})
		if err != nil {
			return nil, fmt.Errorf("node e2e %s: %w", o.Agent, err)
		}
		cleanups = append(cleanups, func() {
			k.Stop()
			copyFile(k.LogPath, filepath.Join(o.Out, "logs", name, "kubelet.log"))
		})
	default:
		return nil, fmt.Errorf("node e2e: agent %q: want %s or %s", o.Agent, Speclet, Kubelet)
	}
	stopForward, err := loopbackForward(ReadOnlyPort, net.JoinHostPort(addr.IP, strconv.Itoa(ReadOnlyPort)))
	if err != nil {
		return nil, fmt.Errorf("node e2e %s: the read-only port: %w", o.Agent, err)
	}
	cleanups = append(cleanups, stopForward)
	if err := waitNodeReady(ctx, admin, name, addr.IP, 3*time.Minute); err != nil {
		return nil, fmt.Errorf("node e2e %s: %w (logs in %s)", o.Agent, err, filepath.Join(o.Out, "logs", name))
	}
	token, err := adminToken(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("node e2e %s: %w", o.Agent, err)
	}
	logf("node %s ready at %s (static pods in %s); running e2e_node.test (%d processes)", name, addr.IP, manifests, o.Procs)

	repoList := filepath.Join(work, "repo-list.yaml")
	if err := os.WriteFile(repoList, []byte(nc.RepoList(o.Registry.Addr)), 0o644); err != nil {
		return nil, err
	}
	report, junit := filepath.Join(o.Out, "report.json"), filepath.Join(o.Out, "junit.xml")
	os.Remove(report)
	os.Remove(junit)
	label := LabelFilter
	if o.Serial {
		label = SerialLabelFilter
	}
	args := []string{
		"--procs", strconv.Itoa(o.Procs),
		"--label-filter", label,
		"--skip", excluded(),
		"--timeout", o.Timeout.String(),
		"--no-color", "--silence-skips",
		"--output-dir", o.Out, "--json-report", filepath.Base(report), "--junit-report", filepath.Base(junit),
	}
	if o.Focus != "" {
		args = append(args, "--focus", o.Focus)
	}
	if o.FocusFile != "" {
		args = append(args, "--focus-file", o.FocusFile)
	}
	reportDir := filepath.Join(work, "report")
	os.MkdirAll(reportDir, 0o755)
	args = append(args, o.Bins.E2ENode, "--",
		"--start-services=false", "--prepull-images=false",
		"--host", c.URL, "--bearer-token", token,
		"--node-name", name,
		"--dns-domain", ClusterDomain,
		"--kube-test-repo-list", repoList,
		"--container-runtime-endpoint", cd.Endpoint, "--image-service-endpoint", cd.Endpoint,
		"--report-dir", reportDir,
	)
	glog, err := os.Create(filepath.Join(o.Out, "ginkgo.log"))
	if err != nil {
		return nil, err
	}
	defer glog.Close()
	cmd := exec.CommandContext(ctx, o.Bins.Ginkgo, args...)
	cmd.Dir = work // the suite makes its kubelet drop-in directory in its working directory
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+repoList)
	cmd.Stdout, cmd.Stderr = glog, glog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = time.Minute
	runErr := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	res, err = nc.ReadResult(o.Agent, o.Out)
	if res == nil {
		return nil, fmt.Errorf("node e2e %s: ginkgo %v wrote no report (%v); its log: %s", o.Agent, runErr, err, glog.Name())
	}
	res.Elapsed = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("%v; ginkgo log: %s", err, glog.Name())
	}
	return res, nil
}

// adminToken returns a bearer token of a cluster-admin identity (the
// ServiceAccount kube-system/node-e2e): the node e2e suite authenticates to
// the API server with a token only (--bearer-token).
func adminToken(ctx context.Context, cs *kubernetes.Clientset) (string, error) {
	const ns, sa = "kube-system", "node-e2e"
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("admin token: create service account: %w", err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("admin token: bind cluster-admin: %w", err)
	}
	exp := int64(24 * 3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("admin token: request: %w", err)
	}
	return tr.Status.Token, nil
}

// waitNodeReady waits for node name to be Ready, untainted and at
// InternalIP ip.
func waitNodeReady(ctx context.Context, cs *kubernetes.Clientset, name, ip string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last *corev1.Node
	for time.Now().Before(deadline) {
		if n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			last = n
			ready, at := false, false
			for _, c := range n.Status.Conditions {
				ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
			}
			for _, a := range n.Status.Addresses {
				at = at || a.Type == corev1.NodeInternalIP && a.Address == ip
			}
			if ready && at && len(n.Spec.Taints) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if last == nil {
		return fmt.Errorf("node %s not registered within %s", name, timeout)
	}
	return fmt.Errorf("node %s not Ready, untainted, at InternalIP %s within %s: conditions %+v, addresses %+v, taints %+v",
		name, ip, timeout, last.Status.Conditions, last.Status.Addresses, last.Spec.Taints)
}

func copyFile(src, dst string) {
	b, err := os.ReadFile(src)
	if err != nil {
		return
	}
	os.MkdirAll(filepath.Dir(dst), 0o755)
	os.WriteFile(dst, b, 0o644)
}

func copyLogs(srcDir, dstDir, pattern string) {
	ms, _ := filepath.Glob(filepath.Join(srcDir, pattern))
	for _, m := range ms {
		copyFile(m, filepath.Join(dstDir, filepath.Base(m)))
	}
}
