package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/test/cluster"
)

// NodeName is the node name both agents get (kubelet's --hostname-override,
// speclet's --node-name), so that static pod "x" is "x-conf" on both.
const NodeName = "conf"

// AgentKind names an agent under test.
type AgentKind string

const (
	Kubelet AgentKind = "kubelet"
	Speclet AgentKind = "speclet"
)

// Agent is one node agent running on its own harness containerd, with its
// own static pod directory and read-only port on 127.0.0.1.
type Agent struct {
	Kind      AgentKind
	Bin       string
	Dir       string // temp dir: manifests, root dir, config, log
	Manifests string
	LogPath   string
	Base      string // http://127.0.0.1:PORT
	C         *harness.Containerd
	RT        *cri.Client

	cmd    *exec.Cmd
	exited chan struct{}
}

// freePort returns a port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// StartAgent starts a containerd of the harness (serving images from reg)
// and the agent on it. bin is the kubelet or speclet binary; extra flags
// come after the harness's own (the last of a repeated flag wins).
func StartAgent(ctx context.Context, kind AgentKind, bin string, reg *harness.Registry, log io.Writer, extra ...string) (a *Agent, err error) {
	dir, err := os.MkdirTemp("", "speclet-conf-"+string(kind)+"-")
	if err != nil {
		return nil, err
	}
	a = &Agent{Kind: kind, Bin: bin, Dir: dir, Manifests: filepath.Join(dir, "manifests"), LogPath: filepath.Join(dir, string(kind)+".log")}
	defer func() {
		if err != nil {
			a.Stop()
			a = nil
		}
	}()
	if err := os.MkdirAll(a.Manifests, 0o755); err != nil {
		return a, err
	}
	c, err := harness.StartContainerd(ctx, harness.Options{Registry: reg, Log: log})
	if err != nil {
		return a, err
	}
	a.C = c
	rt, err := cri.Dial(ctx, c.Endpoint, cri.WithTimeout(30*time.Second))
	if err != nil {
		return a, err
	}
	a.RT = rt
	return a, a.start(kind, bin, extra...)
}

// start runs the agent on a's containerd and manifests, and waits until it
// serves GET /pods.
func (a *Agent) start(kind AgentKind, bin string, extra ...string) (err error) {
	a.Kind, a.Bin, a.LogPath = kind, bin, filepath.Join(a.Dir, string(kind)+".log")
	c, dir := a.C, a.Dir
	port, err := freePort()
	if err != nil {
		return err
	}
	a.Base = fmt.Sprintf("http://127.0.0.1:%d", port)
	var args []string
	switch kind {
	case Kubelet:
		args, err = a.kubeletArgs(port)
		if err != nil {
			return err
		}
	case Speclet:
		args = []string{"run",
			"--container-runtime-endpoint", c.Endpoint,
			"--pod-manifest-path", a.Manifests,
			"--root-dir", filepath.Join(dir, "root"),
			"--pod-logs-dir", filepath.Join(dir, "root", "logs"), "--container-log-links-dir", filepath.Join(dir, "root", "containers"),
			"--device-plugins-dir", filepath.Join(dir, "root", "device-plugins"),
			"--node-name", NodeName,
			"--file-check-frequency", "1s", // as kubelet's configuration (kubeletArgs)
			"--read-only-port", fmt.Sprint(port), "--port", "0", "--healthz-port", "0",
			"--runtime-wait", "60s",
			"-v", "4"}
	default:
		return fmt.Errorf("unknown agent %q", kind)
	}
	args = append(args, extra...)
	logf, err := os.Create(a.LogPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", kind, err)
	}
	a.cmd, a.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(a.exited) }()
	// Ready when GET /pods answers a PodList.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-a.exited:
			return fmt.Errorf("%s exited at start: %s; log:\n%s", kind, cmd.ProcessState, a.LogTail(30))
		default:
		}
		if _, err := a.Pods(); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: GET /pods not answering within 2m; log:\n%s", kind, a.LogTail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// kubeletArgs writes the KubeletConfiguration of a standalone kubelet (no
// API server: static pods only) and returns its flags.
func (a *Agent) kubeletArgs(readOnlyPort int) ([]string, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	healthz, err := freePort()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(a.Dir, "root")
	cfg := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"staticPodPath":            a.Manifests,
		"fileCheckFrequency":       "1s",
		"cgroupDriver":             "cgroupfs",
		"failSwapOn":               false,
		"cgroupsPerQOS":            false,
		"enforceNodeAllocatable":   []string{},
		"containerRuntimeEndpoint": a.C.Endpoint,
		"imageServiceEndpoint":     a.C.Endpoint,
		"address":                  "127.0.0.1",
		"port":                     port,
		"readOnlyPort":             readOnlyPort,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              healthz,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": true},
			"webhook":   map[string]any{"enabled": false},
		},
		"authorization":          map[string]any{"mode": "AlwaysAllow"},
		"podLogsDir":             filepath.Join(a.Dir, "pod-logs"),
		"resolvConf":             "/etc/resolv.conf",
		"registerNode":           false,
		"makeIPTablesUtilChains": false,
		// The test machine's disk and memory are not what is tested: never
		// evict, never collect images.
		"evictionHard":                map[string]string{"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(a.Dir, "kubelet-config.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, err
	}
	return []string{
		"--config", path,
		"--hostname-override", NodeName,
		"--root-dir", root,
		"--cert-dir", filepath.Join(a.Dir, "pki"),
		"--v", "2",
	}, nil
}

// Pods is GET /pods.
func (a *Agent) Pods() ([]v1.Pod, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(a.Base + "/pods")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET /pods: %d %v", resp.StatusCode, err)
	}
	var list v1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET /pods: %w", err)
	}
	return list.Items, nil
}

// podLabel is the CRI label that carries the pod's name.
func (a *Agent) podLabel() string {
	if a.Kind == Kubelet {
		return "io.kubernetes.pod.name"
	}
	return engine.LabelPodName
}

// RuntimeOf describes what the runtime holds of pod (full name).
func (a *Agent) RuntimeOf(ctx context.Context, pod string) (string, int, error) {
	cs, sbs, err := a.runtimeObjects(ctx, pod)
	if err != nil {
		return "", 0, err
	}
	running, exited, ready := 0, 0, 0
	for _, c := range cs {
		switch c.State.String() {
		case "CONTAINER_RUNNING":
			running++
		case "CONTAINER_EXITED":
			exited++
		}
	}
	for _, s := range sbs {
		if s.State.String() == "SANDBOX_READY" {
			ready++
		}
	}
	return fmt.Sprintf("containers=%d (running=%d exited=%d) sandboxes=%d (ready=%d)", len(cs), running, exited, len(sbs), ready), len(cs) + len(sbs), nil
}

func (a *Agent) runtimeObjects(ctx context.Context, pod string) ([]*runtimeapi.Container, []*runtimeapi.PodSandbox, error) {
	sel := map[string]string{a.podLabel(): pod}
	cs, err := a.RT.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return nil, nil, err
	}
	ss, err := a.RT.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return nil, nil, err
	}
	return cs, ss, nil
}

// LogTail is the last n lines of the agent's log.
func (a *Agent) LogTail(n int) string { return cluster.TailFile(a.LogPath, n) }

// Stop stops the agent (SIGTERM, then SIGKILL after 30 s), then its
// containerd (which removes every pod left), and removes the temp dir.
func (a *Agent) Stop() error {
	var errs []string
	if a.cmd != nil {
		a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.exited:
		case <-time.After(30 * time.Second):
			a.cmd.Process.Kill()
			<-a.exited
		}
	}
	if a.RT != nil {
		a.RT.Close()
	}
	if a.C != nil {
		if err := a.C.Stop(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if a.keepDir() {
		if len(errs) > 0 {
			return fmt.Errorf("stop %s: %s", a.Kind, strings.Join(errs, "; "))
		}
		return nil
	}
	// kubelet bind-mounts its root dir onto itself (mount propagation);
	// detach what is left under the agent's dir, deepest first.
	mounts := harness.Mounts(a.Dir)
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := syscall.Unmount(mounts[i], syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Sprintf("unmount %s: %v", mounts[i], err))
		}
	}
	if len(harness.Mounts(a.Dir)) == 0 {
		os.RemoveAll(a.Dir)
	} else {
		errs = append(errs, fmt.Sprintf("mounts left under %s", a.Dir))
	}
	if len(errs) > 0 {
		return fmt.Errorf("stop %s: %s", a.Kind, strings.Join(errs, "; "))
	}
	return nil
}
