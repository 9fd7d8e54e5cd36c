package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/speclet/speclet/cri/harness"
)

// BuildSpeclet builds cmd/speclet into dir and returns the binary's path.
func BuildSpeclet(dir string) (string, error) {
	bin := filepath.Join(dir, "speclet")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/speclet/speclet/cmd/speclet").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build speclet: %v\n%s", err, out)
	}
	return bin, nil
}

// NodeOptions configure a speclet node.
type NodeOptions struct {
	Name string
	// Bin is the speclet binary (BuildSpeclet).
	Bin string
	// Containerd is the node's own runtime (cri/harness); the node does not
	// stop it. nil: speclet's simulated runtime (--runtime sim).
	Containerd *harness.Containerd
	// Dir holds the node's root dir, manifests and log.
	Dir string
	// Args are extra flags for `speclet run`.
	Args []string
	// Kubeconfig overrides the node's kubeconfig (default: NodeKubeconfig(Name)).
	Kubeconfig string
	// ReadOnly is host:port of the read-only server (--read-only-address,
	// --read-only-port; Base); default 127.0.0.1 and a free port.
	ReadOnly string
	Log      io.Writer
}

// Node is a running `speclet run` joined to the cluster.
type Node struct {
	Name string
	// Manifests is the node's --pod-manifest-path.
	Manifests string
	// Base is the read-only server's URL (http://127.0.0.1:PORT).
	Base string
	// API is the kubelet API's URL (https://127.0.0.1:PORT).
	API string
	// Healthz is the healthz server's URL (http://127.0.0.1:PORT/healthz).
	Healthz string
	LogPath string
	// Dir is NodeOptions.Dir: the root dir, manifests and log.
	Dir string

	args   []string
	bin    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartNode runs speclet as node o.Name of c on o.Containerd, with
// --node-ip 127.0.0.1, and returns once its /healthz answers.
func (c *Cluster) StartNode(ctx context.Context, o NodeOptions) (*Node, error) {
	kc := o.Kubeconfig
	if kc == "" {
		var err error
		if kc, err = c.NodeKubeconfig(o.Name); err != nil {
			return nil, err
		}
	}
	roHost, port := "127.0.0.1", 0
	if o.ReadOnly != "" {
		h, p, err := net.SplitHostPort(o.ReadOnly)
		if err != nil {
			return nil, fmt.Errorf("start node %s: ReadOnly %q: %w", o.Name, o.ReadOnly, err)
		}
		if roHost, port = h, 0; p != "" {
			if port, err = strconv.Atoi(p); err != nil {
				return nil, fmt.Errorf("start node %s: ReadOnly %q: %w", o.Name, o.ReadOnly, err)
			}
		}
	}
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	// The kubelet API (10250 by default) gets a port of its own: several
	// nodes run on one machine.
	apiPort, err := freePort()
	if err != nil {
		return nil, err
	}
	// So does the healthz server (10248 by default).
	healthzPort, err := freePort()
	if err != nil {
		return nil, err
	}
	n := &Node{
		Name: o.Name, Manifests: filepath.Join(o.Dir, "manifests"), bin: o.Bin, Dir: o.Dir,
		Base: "http://" + net.JoinHostPort(roHost, strconv.Itoa(port)), API: fmt.Sprintf("https://127.0.0.1:%d", apiPort),
		Healthz: fmt.Sprintf("http://127.0.0.1:%d/healthz", healthzPort), LogPath: filepath.Join(o.Dir, "speclet.log"),
	}
	c.watch(o.Dir)
	if err := os.MkdirAll(n.Manifests, 0o755); err != nil {
		return nil, err
	}
	runtimeArgs := []string{"--runtime", "sim"}
	if o.Containerd != nil {
		runtimeArgs = []string{"--container-runtime-endpoint", o.Containerd.Endpoint,
			"--pod-logs-dir", filepath.Join(o.Dir, "root", "logs"), "--container-log-links-dir", filepath.Join(o.Dir, "root", "containers"),
			"--device-plugins-dir", filepath.Join(o.Dir, "root", "device-plugins")}
	}
	n.args = append([]string{"run"}, runtimeArgs...)
	n.args = append(n.args,
		"--kubeconfig", kc,
		"--node-name", o.Name,
		"--node-ip", "127.0.0.1",
		"--pod-manifest-path", n.Manifests,
		"--root-dir", filepath.Join(o.Dir, "root"),
		"--read-only-port", strconv.Itoa(port),
		"--port", strconv.Itoa(apiPort),
		"--healthz-port", strconv.Itoa(healthzPort),
		// kube-apiserver reaches the kubelet API (kubectl logs, exec,
		// port-forward) with its --kubelet-client-certificate, signed by
		// the cluster CA (O=system:masters); requests are authorized by
		// SubjectAccessReview, speclet's default with --kubeconfig.
		"--client-ca-file", c.caCrt,
		"--crashloop-backoff-base", "1s",
		"--runtime-wait", "60s",
		"-v", "2",
	)
	if o.ReadOnly != "" {
		// Without it speclet chooses: 127.0.0.1 with --kubeconfig.
		n.args = append(n.args, "--read-only-address", roHost)
	}
	n.args = append(n.args, o.Args...)
	return n, n.Start(ctx)
}

// NodeForTest starts speclet as node o.Name of c, as StartNode does (a
// failure fails t), and tears it down in t.Cleanup in the cluster
// command's order: the node stops, its runtime o.Containerd (if any) stops
// and so removes its pods, then Remove unmounts the volumes speclet left
// mounted and removes o.Dir. It then fails t, listing what is left, if a
// process the node started, a mount under o.Dir or o.Dir itself is
// (harness.CheckLeaks). On failure the node's log tail is in t's log.
func (c *Cluster) NodeForTest(ctx context.Context, t testing.TB, o NodeOptions) *Node {
	t.Helper()
	leaks := harness.CheckLeaks(t)
	leaks.Gone(o.Dir)
	n, err := c.StartNode(ctx, o)
	if n != nil {
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("log of %s:\n%s", n.Name, n.LogTail(60))
			}
			if err := n.Stop(); err != nil {
				t.Error(err)
			}
			if o.Containerd != nil {
				if err := o.Containerd.Stop(); err != nil {
					t.Errorf("node %s: %v", n.Name, err)
				}
			}
			if err := n.Remove(); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Start (re)starts the daemon and waits for /healthz.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== speclet start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(n.bin, n.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a terminal's Ctrl-C reaches speclet only
	// through Stop, in the order the caller tears down; it dies with its
	// parent.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start speclet %s: %w", n.Name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	n.cmd, n.exited = cmd, exited
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("speclet %s exited at start: %s; log:\n%s", n.Name, cmd.ProcessState, n.LogTail(30))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := http.Get(n.Base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("speclet %s: /healthz not ok within 90s; log:\n%s", n.Name, n.LogTail(30))
}

// Stop sends SIGTERM and waits for the exit (pods keep running in the
// runtime, as after any speclet stop).
func (n *Node) Stop() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return nil
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		n.cmd.Process.Kill()
		<-n.exited
		n.cmd = nil
		return fmt.Errorf("speclet %s did not exit within 30s of SIGTERM", n.Name)
	}
	n.cmd = nil
	return nil
}

// Remove removes what the stopped node leaves on the machine: it unmounts
// every mount under Dir and removes Dir. speclet leaves its pods running
// when it stops (they are adopted at the next start), so their volumes
// (projected service-account tokens, secrets, memory-backed emptyDirs are
// tmpfs mounts under <root-dir>/pods/<uid>/volumes) stay mounted after
// Stop; call Remove once the node's runtime removed the pods (for a
// harness.Containerd: its Stop), so that no container still uses them.
func (n *Node) Remove() error {
	n.mu.Lock()
	running := n.cmd != nil
	n.mu.Unlock()
	if running {
		return fmt.Errorf("remove node %s: speclet still runs; Stop it first", n.Name)
	}
	if err := harness.Unmount(n.Dir); err != nil {
		return fmt.Errorf("remove node %s: %w", n.Name, err)
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		return fmt.Errorf("remove node %s: %w", n.Name, err)
	}
	return nil
}

// LogTail returns the last lines of the node's log.
func (n *Node) LogTail(lines int) string { return TailFile(n.LogPath, lines) }
