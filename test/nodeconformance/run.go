package nodeconformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/cluster"
)

// Agents a run can put on its nodes.
const (
	Speclet = "speclet"
	Kubelet = "kubelet"
)

// FocusFiles selects the spec files of the suite: common/node and
// common/storage of test/e2e.
const FocusFiles = `test/e2e/common/(node|storage)/`

// LabelFilter selects the [NodeConformance] specs and leaves out [Serial],
// [Disruptive] and [Flaky] ones.
const LabelFilter = `NodeConformance && !Serial && !Disruptive && !Flaky`

// Options configure one run of the suite on one agent.
type Options struct {
	// Agent is Speclet or Kubelet.
	Agent string
	// Bins are the suite's binaries (BuildBinaries).
	Bins Binaries
	// Registry serves the images (PushImages done).
	Registry *harness.Registry
	// SpecletBin is the speclet binary (Agent Speclet); SpecletArgs extra
	// flags for `speclet run`.
	SpecletBin  string
	SpecletArgs []string
	// KubeletBin is the kubelet binary (Agent Kubelet).
	KubeletBin string
	// Version of the control plane (default DefaultVersion).
	Version string
	// Nodes is how many nodes of Agent join (default 1), each on its own
	// containerd.
	Nodes int
	// Procs is how many Ginkgo processes run specs in parallel (default 5).
	Procs int
	// Focus, when set, keeps only the specs whose full name it matches
	// (a regexp, on top of the [NodeConformance] selection).
	Focus string
	// Out receives junit.xml, report.json, ginkgo.log and the logs of the
	// control plane and of every node.
	Out string
	// Timeout bounds the Ginkgo run (default 90 minutes).
	Timeout time.Duration
	// Log receives progress.
	Log io.Writer
}

// Result of one run.
type Result struct {
	Agent string
	// Specs are the selected specs with their verdicts, sorted by name
	// (Skips included, as Skip).
	Specs []Spec
	// JUnit is the JUnit XML report's path.
	JUnit   string
	Elapsed time.Duration
}

// Passed is how many specs passed.
func (r *Result) Passed() int { return Count(r.Specs, Pass) }

func (o *Options) defaults() {
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	if o.Procs <= 0 {
		o.Procs = 5
	}
	if o.Timeout <= 0 {
		o.Timeout = 90 * time.Minute
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// Run starts a control plane (scheduler and controller-manager included)
// with o.Nodes nodes of o.Agent, each on its own containerd pulling from
// o.Registry, runs the selected specs with Ginkgo, and stops and removes
// everything it started, whatever happens. Spec failures are not errors;
// an error means the run itself failed (and names what); when Ginkgo still
// reported (a suite timeout, an interrupt) the Result comes with the error.
func Run(ctx context.Context, o Options) (res *Result, err error) {
	o.defaults()
	start := time.Now()
	logf := func(format string, a ...any) {
		fmt.Fprintf(o.Log, "nodeconf %s: "+format+"\n", append([]any{o.Agent}, a...)...)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("run %s: %w", o.Agent, err)
	}
	work, err := os.MkdirTemp("", "speclet-nodeconf-")
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", o.Agent, err)
	}
	var cleanups []func()
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		for _, m := range reverse(harness.Mounts(work)) {
			syscall.Unmount(m, syscall.MNT_DETACH)
		}
		if rmErr := os.RemoveAll(work); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("run %s: remove %s: %w", o.Agent, work, rmErr))
		}
	}()

	c, err := cluster.Start(ctx, cluster.Options{Version: o.Version, Dir: filepath.Join(work, "cluster"), Scheduler: true, ControllerManager: true, Log: o.Log})
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", o.Agent, err)
	}
	cleanups = append(cleanups, func() {
		copyLogs(filepath.Join(work, "cluster"), filepath.Join(o.Out, "logs", "control-plane"), "*.log")
		c.Stop()
	})
	admin, err := c.AdminClient()
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", o.Agent, err)
	}
	var names []string
	for i := 0; i < o.Nodes; i++ {
		name := fmt.Sprintf("%s-%c", o.Agent, 'a'+i)
		names = append(names, name)
		cd, err := harness.StartContainerd(ctx, harness.Options{Registry: o.Registry, Log: o.Log})
		if err != nil {
			return nil, fmt.Errorf("run %s: containerd of node %s: %w", o.Agent, name, err)
		}
		cleanups = append(cleanups, func() {
			copyFile(cd.LogPath(), filepath.Join(o.Out, "logs", name, "containerd.log"))
			if err := cd.Stop(); err != nil {
				logf("stop containerd of %s: %v", name, err)
			}
		})
		dir := filepath.Join(work, name)
		switch o.Agent {
		case Speclet:
			// kubelet's back-off (10 s doubling to 300 s) instead of the
			// harness's 1 s: the suite measures restart delays.
			// The node's logs where kubelet's are (the harness's default is
			// under the node's directory): the suite's ContainerLogPath spec
			// reads /var/log/containers and /var/log/pods through hostPath
			// volumes, as it does on the kubelet nodes of the same run.
			args := append([]string{"--crashloop-backoff-base", "10s",
				"--pod-logs-dir", "/var/log/pods", "--container-log-links-dir", "/var/log/containers"}, o.SpecletArgs...)
			n, err := c.StartNode(ctx, cluster.NodeOptions{Name: name, Bin: o.SpecletBin, Containerd: cd, Dir: dir, Args: args})
			if err != nil {
				return nil, fmt.Errorf("run %s: node %s: %w", o.Agent, name, err)
			}
			cleanups = append(cleanups, func() {
				if err := n.Stop(); err != nil {
					logf("%v", err)
				}
				copyFile(n.LogPath, filepath.Join(o.Out, "logs", name, "speclet.log"))
			})
		case Kubelet:
			k, err := c.StartKubelet(cluster.KubeletOptions{Name: name, Bin: o.KubeletBin, Containerd: cd, Dir: dir})
			if err != nil {
				return nil, fmt.Errorf("run %s: node %s: %w", o.Agent, name, err)
			}
			cleanups = append(cleanups, func() {
				k.Stop()
				copyFile(k.LogPath, filepath.Join(o.Out, "logs", name, "kubelet.log"))
			})
		default:
			return nil, fmt.Errorf("run: agent %q: want %s or %s", o.Agent, Speclet, Kubelet)
		}
	}
	for _, name := range names {
		if err := waitNodeReady(ctx, admin, name, 3*time.Minute); err != nil {
			return nil, fmt.Errorf("run %s: %w (logs in %s)", o.Agent, err, filepath.Join(o.Out, "logs", name))
		}
	}
	logf("nodes %s ready; running the suite (%d processes)", strings.Join(names, ", "), o.Procs)

	repoList := filepath.Join(work, "repo-list.yaml")
	if err := os.WriteFile(repoList, []byte(RepoList(o.Registry.Addr)), 0o644); err != nil {
		return nil, err
	}
	report, junit := filepath.Join(o.Out, "report.json"), filepath.Join(o.Out, "junit.xml")
	os.Remove(report)
	os.Remove(junit)
	args := []string{
		"--procs", strconv.Itoa(o.Procs),
		"--label-filter", LabelFilter,
		"--focus-file", FocusFiles,
		"--skip", excluded(),
		"--timeout", o.Timeout.String(),
		"--no-color", "--silence-skips",
		"--output-dir", o.Out, "--json-report", filepath.Base(report), "--junit-report", filepath.Base(junit),
	}
	if o.Focus != "" {
		args = append(args, "--focus", o.Focus)
	}
	args = append(args, o.Bins.E2E, "--",
		"--kubeconfig", c.AdminKubeconfig(),
		"--provider", "skeleton",
		"--kubectl-path", filepath.Join(c.BinDir, "kubectl"),
		"--e2e-output-dir", filepath.Join(work, "e2e-output"),
		"--kube-test-repo-list", repoList,
		"--disable-log-dump",
		"--minStartupPods", "0",
		"--node-os-distro", "debian",
		"--container-runtime-endpoint", "unix:///nonexistent/containerd.sock",
	)
	os.MkdirAll(filepath.Join(work, "e2e-output"), 0o755)
	glog, err := os.Create(filepath.Join(o.Out, "ginkgo.log"))
	if err != nil {
		return nil, err
	}
	defer glog.Close()
	cmd := exec.CommandContext(ctx, o.Bins.Ginkgo, args...)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+repoList)
	cmd.Stdout, cmd.Stderr = glog, glog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Interrupted, Ginkgo stops its processes, runs their cleanup and
	// writes the reports of what ran; after a minute the whole group dies.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = time.Minute
	runErr := cmd.Run()
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // any e2e.test left of the group
	}
	specs, suiteErr, err := readReport(report)
	if err != nil {
		return nil, fmt.Errorf("run %s: ginkgo %v wrote no report (%v); its log: %s", o.Agent, runErr, err, glog.Name())
	}
	res = &Result{Agent: o.Agent, Specs: specs, JUnit: junit, Elapsed: time.Since(start)}
	if suiteErr != nil {
		// The specs that ran keep their verdicts (a suite timeout, an
		// interrupt); the error says the run is incomplete.
		return res, fmt.Errorf("run %s: %v; ginkgo log: %s", o.Agent, suiteErr, glog.Name())
	}
	return res, nil
}

func waitNodeReady(ctx context.Context, cs *kubernetes.Clientset, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last *corev1.Node
	for time.Now().Before(deadline) {
		if n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			last = n
			if nodeUsable(n) {
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
	return fmt.Errorf("node %s not Ready, untainted, with an InternalIP within %s: conditions %+v, addresses %+v, taints %+v",
		name, timeout, last.Status.Conditions, last.Status.Addresses, last.Spec.Taints)
}

// nodeUsable: Ready, an InternalIP (the API server reaches the node's API
// there for logs and exec) and no taint.
func nodeUsable(n *corev1.Node) bool {
	ready, ip := false, false
	for _, c := range n.Status.Conditions {
		ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	}
	for _, a := range n.Status.Addresses {
		ip = ip || a.Type == corev1.NodeInternalIP
	}
	return ready && ip && len(n.Spec.Taints) == 0
}

func reverse(s []string) []string {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
	return s
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
