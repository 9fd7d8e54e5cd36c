// Package e2e runs the real `speclet run` binary on a real containerd (the
// cri/harness one) and checks what a user sees: GET /pods of the read-only
// port and the containers in the runtime.
//
// The package shares one containerd and one speclet daemon, started by the
// first test that needs them and stopped by TestMain. Tests that disturb the
// daemon or containerd (kill -9, restarts) are sequential; the others run in
// parallel, each with its own pods. Without root the tests skip, except with
// CI=true, where they fail.
//
// Every daemon runs with --cri-audit-log; at the end TestMain fails the run
// when a recorded CRI call breaks the spec's cri lists (engine/criaudit:
// a mutating call outside an action, or an undeclared call in one).
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/criaudit"
)

// nodeName is the daemon's --node-name: pod "x" shows as "x-e2e".
const nodeName = "e2e"

var shared struct {
	once    sync.Once
	err     error
	bin     string // the speclet binary
	tmp     string
	c       *harness.Containerd
	rt      *cri.Client
	d       *daemon
	cleanup []func()
	// dirty is set by a cleanup that left something behind, or by the CRI
	// audit of the daemons' calls; it fails the run.
	dirty bool
	// auditLogs are the --cri-audit-log files of every daemon started.
	auditLogs []string
}

func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(shared.cleanup) - 1; i >= 0; i-- {
		shared.cleanup[i]()
	}
	if shared.dirty && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// env returns the shared containerd and speclet daemon, starting them on
// first use. Without root it skips the test (fails it with CI=true).
func env(t testing.TB) (*harness.Containerd, *daemon) {
	t.Helper()
	if os.Geteuid() != 0 {
		msg := "end-to-end tests run containerd and need root; run them as root"
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %s", msg)
		}
		t.Skip(msg)
	}
	shared.once.Do(func() { shared.err = setup() })
	if shared.err != nil {
		t.Fatalf("e2e setup: %v", shared.err)
	}
	return shared.c, shared.d
}

func setup() error {
	tmp, err := os.MkdirTemp("", "speclet-e2e-")
	if err != nil {
		return err
	}
	shared.tmp = tmp
	shared.cleanup = append(shared.cleanup, func() { os.RemoveAll(tmp) })
	// Cleanups run last first: the audit reads the logs after the daemon
	// stopped and before tmp is removed.
	shared.cleanup = append(shared.cleanup, checkCRIAudit)
	shared.bin = filepath.Join(tmp, "speclet")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go") // the toolchain running this test
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	build := exec.Command(goBin, "build", "-o", shared.bin, "github.com/speclet/speclet/cmd/speclet")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build speclet: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := harness.EnsurePackages(ctx, os.Stderr); err != nil {
		return err
	}
	c, err := harness.StartContainerd(ctx, harness.Options{Log: io.Discard})
	if err != nil {
		return err
	}
	shared.c = c
	shared.cleanup = append(shared.cleanup, func() {
		dir := c.Dir
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stop containerd:", err)
			shared.dirty = true
		}
		if left := harness.Leftovers(dir); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "e2e: processes left after Stop: %v\n", left)
			shared.dirty = true
		}
		if m := harness.Mounts(dir); len(m) > 0 {
			fmt.Fprintf(os.Stderr, "e2e: mounts left after Stop: %v\n", m)
			shared.dirty = true
		}
	})
	rt, err := cri.Dial(ctx, c.Endpoint, cri.WithTimeout(2*time.Minute)) // as the daemon's --runtime-request-timeout
	if err != nil {
		return err
	}
	shared.rt = rt
	d, err := startDaemon(tmp, c.Endpoint)
	if err != nil {
		return err
	}
	shared.d = d
	shared.cleanup = append(shared.cleanup, func() {
		if err := d.signal(syscall.SIGTERM); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			shared.dirty = true
		}
	})
	return nil
}

// checkCRIAudit reads the CRI calls every daemon recorded (--cri-audit-log)
// and marks the run dirty when a mutating call happened outside a spec action
// or handler (spec/callers.hcl: the kubelet API, log rotation), or an action
// or handler called a method its spec does not allow (engine/criaudit).
// Declared methods no call showed are listed for information only: the
// engine tests, not these, must cover every action.
func checkCRIAudit() {
	var recs []criaudit.Record
	for _, path := range shared.auditLogs {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: CRI audit:", err)
			shared.dirty = true
			continue
		}
		r, err := criaudit.ReadLog(f)
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: CRI audit:", err)
			shared.dirty = true
		}
		recs = append(recs, r...)
	}
	if len(shared.auditLogs) == 0 {
		return
	}
	if v := criaudit.Check(recs); len(v) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: CRI audit: %d violations over %d calls of the daemons:\n%s", len(v), len(recs), criaudit.FormatViolations(v))
		shared.dirty = true
	} else {
		fmt.Fprintf(os.Stderr, "e2e: CRI audit: %d calls of the daemons, no violation\n", len(recs))
	}
	if u := criaudit.Unseen(recs, append(criaudit.Declared(), criaudit.DeclaredHandlers()...)); len(u) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: CRI audit (information): declared methods no daemon call showed:\n%s", criaudit.FormatUnseen(u))
	}
}

// daemon is the speclet process under test.
type daemon struct {
	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
	endpoint  string
	manifests string
	rootDir   string
	logPath   string
	auditLog  string // --cri-audit-log, appended by every start
	port      int
	base      string // http://127.0.0.1:PORT
	// apiBase is the kubelet API (--port, anonymous requests allowed:
	// without --kubeconfig every request is authorized).
	apiBase string // https://127.0.0.1:PORT
}

func startDaemon(tmp, endpoint string) (*daemon, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	al, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	apiPort := al.Addr().(*net.TCPAddr).Port
	al.Close()
	d := &daemon{
		endpoint:  endpoint,
		manifests: filepath.Join(tmp, "manifests"),
		rootDir:   filepath.Join(tmp, "root"),
		logPath:   filepath.Join(tmp, "speclet.log"),
		auditLog:  filepath.Join(tmp, "cri-audit.jsonl"),
		port:      port,
		base:      fmt.Sprintf("http://127.0.0.1:%d", port),
		apiBase:   fmt.Sprintf("https://127.0.0.1:%d", apiPort),
	}
	if err := os.MkdirAll(d.manifests, 0o755); err != nil {
		return nil, err
	}
	shared.auditLogs = append(shared.auditLogs, d.auditLog)
	return d, d.start()
}

// start runs the binary and waits until GET /healthz answers 200.
func (d *daemon) start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== speclet start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(shared.bin, "run",
		"--container-runtime-endpoint", d.endpoint,
		"--pod-manifest-path", d.manifests,
		"--root-dir", d.rootDir,
		"--pod-logs-dir", filepath.Join(d.rootDir, "log", "pods"), "--container-log-links-dir", filepath.Join(d.rootDir, "log", "containers"),
		"--device-plugins-dir", filepath.Join(d.rootDir, "device-plugins"),
		"--node-name", nodeName,
		"--node-ip", "127.0.0.1", // hostNetwork pods' probes without a host (grpc) stay on loopback
		"--read-only-port", fmt.Sprint(d.port), "--port", strings.TrimPrefix(d.apiBase, "https://127.0.0.1:"), "--anonymous-auth", "--healthz-port", "0",
		"--sync-frequency", "10s",
		"--crashloop-backoff-base", "1s",
		"--image-pull-backoff-base", "1s",
		"--runtime-request-timeout", "2m", // kubelet's default: a burst of 100 sandboxes takes longer than 30 s on a slow day
		"--runtime-wait", "60s",
		"--cri-audit-log", d.auditLog,
		"-v", "4")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start speclet: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	d.cmd, d.exited = cmd, exited
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("speclet exited at start: %s; log:\n%s", cmd.ProcessState, d.logTail(40))
		default:
		}
		if resp, err := http.Get(d.base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("speclet /healthz not ok within 90s; log:\n%s", d.logTail(40))
}

// signal sends sig to the daemon and waits until it exits.
func (d *daemon) signal(sig syscall.Signal) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return nil
	}
	d.cmd.Process.Signal(sig)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
		return fmt.Errorf("speclet did not exit within 30s of %s", sig)
	}
	cmd := d.cmd
	d.cmd = nil
	if sig == syscall.SIGTERM && !cmd.ProcessState.Success() {
		return fmt.Errorf("speclet exited with %s after SIGTERM, want status 0", cmd.ProcessState)
	}
	return nil
}

func (d *daemon) logTail(n int) string {
	b, _ := os.ReadFile(d.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// dumpOnFailure logs the daemon's recent log lines about pod when t failed.
func (d *daemon) dumpOnFailure(t *testing.T, pod string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		b, _ := os.ReadFile(d.logPath)
		var keep []string
		for _, l := range strings.Split(string(b), "\n") {
			if pod == "" || strings.Contains(l, pod) || strings.Contains(l, "level=ERROR") || strings.HasPrefix(l, "====") {
				keep = append(keep, l)
			}
		}
		if len(keep) > 80 {
			keep = keep[len(keep)-80:]
		}
		t.Logf("speclet log (%s, lines about %s):\n%s", d.logPath, pod, strings.Join(keep, "\n"))
	})
}

// pods returns GET /pods.
func (d *daemon) pods(t testing.TB) []v1.Pod {
	t.Helper()
	list, err := d.tryPods()
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func (d *daemon) tryPods() ([]v1.Pod, error) {
	resp, err := http.Get(d.base + "/pods")
	if err != nil {
		return nil, fmt.Errorf("GET /pods: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET /pods: %d %v: %s", resp.StatusCode, err, body)
	}
	var list v1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET /pods: decode: %w", err)
	}
	if list.Kind != "PodList" || list.APIVersion != "v1" {
		return nil, fmt.Errorf("GET /pods: kind %q apiVersion %q, want a v1 PodList", list.Kind, list.APIVersion)
	}
	return list.Items, nil
}

// pod returns the pod named name-<node> from GET /pods, or nil.
func (d *daemon) pod(t testing.TB, name string) *v1.Pod {
	t.Helper()
	for _, p := range d.pods(t) {
		if p.Name == name+"-"+nodeName {
			return &p
		}
	}
	return nil
}

// waitPod polls GET /pods until the pod named name satisfies cond (given
// nil when the pod is absent) or timeout passes; it fails the test with the
// last pod seen. Waiting is bounded, never asserted on.
func (d *daemon) waitPod(t testing.TB, name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	p, ok := d.pollPod(name, timeout, cond)
	if !ok {
		t.Fatalf("pod %s: not %s within %s; last seen:\n%s", name, what, timeout, describePod(p))
	}
	return p
}

// pollPod is waitPod that reports instead of failing: the last pod seen and
// whether cond held.
func (d *daemon) pollPod(name string, timeout time.Duration, cond func(*v1.Pod) bool) (*v1.Pod, bool) {
	deadline := time.Now().Add(timeout)
	var last *v1.Pod
	for {
		if list, err := d.tryPods(); err == nil {
			last = nil
			for i := range list {
				if list[i].Name == name+"-"+nodeName {
					last = &list[i]
				}
			}
			if cond(last) {
				return last, true
			}
		}
		if time.Now().After(deadline) {
			return last, false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func describePod(p *v1.Pod) string {
	if p == nil {
		return "(absent from /pods)"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "uid %s phase %s reason %q\n", p.UID, p.Status.Phase, p.Status.Reason)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, "  condition %s=%s %s\n", c.Type, c.Status, c.Reason)
	}
	for _, group := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, c := range group {
			fmt.Fprintf(&b, "  container %s: %s restarts %d ready %v started %v id %s last %s\n", c.Name, stateString(c.State),
				c.RestartCount, c.Ready, c.Started != nil && *c.Started, c.ContainerID, stateString(c.LastTerminationState))
		}
	}
	return b.String()
}

func stateString(s v1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Waiting != nil:
		return fmt.Sprintf("waiting(%s: %s)", s.Waiting.Reason, s.Waiting.Message)
	case s.Terminated != nil:
		return fmt.Sprintf("terminated(%s, exit %d)", s.Terminated.Reason, s.Terminated.ExitCode)
	}
	return "none"
}

// writeManifest writes the manifest of pod name atomically (a dotfile
// renamed into place) and removes it when the test ends, waiting until the
// pod has left /pods and the runtime.
func (d *daemon) writeManifest(t testing.TB, name, manifest string) {
	t.Helper()
	path := filepath.Join(d.manifests, name+".yaml")
	tmp := filepath.Join(d.manifests, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			t.Error(err)
			return
		}
		d.waitGone(t, name, 2*time.Minute)
	})
}

func (d *daemon) removeManifest(t testing.TB, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(d.manifests, name+".yaml")); err != nil {
		t.Fatal(err)
	}
}

// waitGone waits until pod name is absent from /pods and the runtime holds
// no container or sandbox of it.
func (d *daemon) waitGone(t testing.TB, name string, timeout time.Duration) {
	t.Helper()
	d.waitPod(t, name, timeout, "gone from /pods", func(p *v1.Pod) bool { return p == nil })
	deadline := time.Now().Add(timeout)
	for {
		cs, sbs := runtimeObjects(t, name)
		if len(cs) == 0 && len(sbs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s: runtime still holds %d containers and %d sandboxes after %s", name, len(cs), len(sbs), timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runtimeObjects lists the containers and sandboxes of pod name in the
// runtime, by the labels speclet puts on them.
func runtimeObjects(t testing.TB, name string) ([]*runtimeapi.Container, []*runtimeapi.PodSandbox) {
	t.Helper()
	sel := map[string]string{engine.LabelPodName: name + "-" + nodeName}
	ctx := context.Background()
	cs, err := shared.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	sbs, err := shared.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	return cs, sbs
}

// podYAML is a host-network pod with one busybox container per command.
type podSpec struct {
	name          string
	restartPolicy string
	grace         int
	image         string
	init          []ctr
	containers    []ctr
}

type ctr struct {
	name    string
	command string // run by sh -c
	sidecar bool
	image   string
}

func (s podSpec) yaml(c *harness.Containerd) string {
	image := s.image
	if image == "" {
		image = c.ImageRef(harness.BusyboxRepo)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  hostNetwork: true\n", s.name)
	if s.restartPolicy != "" {
		fmt.Fprintf(&b, "  restartPolicy: %s\n", s.restartPolicy)
	}
	fmt.Fprintf(&b, "  terminationGracePeriodSeconds: %d\n", s.grace)
	write := func(key string, cs []ctr) {
		if len(cs) == 0 {
			return
		}
		fmt.Fprintf(&b, "  %s:\n", key)
		for _, c := range cs {
			img := c.image
			if img == "" {
				img = image
			}
			fmt.Fprintf(&b, "  - name: %s\n    image: %s\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", %q]\n", c.name, img, c.command)
			if c.sidecar {
				b.WriteString("    restartPolicy: Always\n")
			}
		}
	}
	write("initContainers", s.init)
	write("containers", s.containers)
	return b.String()
}

// Commands of the test containers. busybox sh as PID 1 ignores SIGTERM
// unless it traps it.
const (
	handlesTERM = "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"
	ignoresTERM = "trap '' TERM; while :; do sleep 1; done"
)

func containerStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	if p == nil {
		return nil
	}
	for _, group := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range group {
			if group[i].Name == name {
				return &group[i]
			}
		}
	}
	return nil
}

func isRunning(p *v1.Pod) bool {
	if p == nil || p.Status.Phase != v1.PodRunning {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) > 0
}

func condition(p *v1.Pod, typ v1.PodConditionType) v1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// runtimeID strips the "<runtime>://" prefix of a status containerID.
func runtimeID(containerID string) string {
	if _, id, ok := strings.Cut(containerID, "://"); ok {
		return id
	}
	return containerID
}

// pid is the running daemon's process id.
func (d *daemon) pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cmd.Process.Pid
}
