package containerdtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/internal/suite"
)

// TestContainerd runs the engine on a real containerd (root only; see
// harness.ForTest): a hostNetwork busybox pod that ignores SIGTERM, a job
// that exits 3 under restartPolicy Never, and a pod in its own network
// namespace (the harness's bridge CNI) that gets a pod IP; then removes them
// and checks that the runtime is empty.
func TestContainerd(t *testing.T) {
	c, ctx := containerdFor(t, 3*time.Minute)
	mk := func(name string, policy v1.RestartPolicy, script string) *v1.Pod {
		return shPod(c, name, policy, 2, script)
	}
	web := mk("web", v1.RestartPolicyAlways, `trap "" TERM; while true; do sleep 0.2; done`)
	web.Spec.Containers[0].Resources.Limits = v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")}
	job := mk("job", v1.RestartPolicyNever, `exit 3`)
	cni := mk("cni", v1.RestartPolicyAlways, `sleep 3600`)
	cni.Spec.HostNetwork = false
	rt, e, updates := startPods(ctx, t, c, engine.Config{}, web, job, cni)

	waitFor(t, ctx, "web Running and Ready, job Failed with exit code 3, cni Running with a pod IP", func() bool {
		var okWeb, okJob, okCNI bool
		for _, p := range e.Pods() {
			switch p.Name {
			case "cni":
				okCNI = p.Status.Phase == v1.PodRunning && p.Status.PodIP != ""
			case "web":
				okWeb = p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
			case "job":
				cs := p.Status.ContainerStatuses
				okJob = p.Status.Phase == v1.PodFailed && len(cs) == 1 && cs[0].State.Terminated != nil &&
					cs[0].State.Terminated.ExitCode == 3 && cs[0].State.Terminated.Reason == "Error"
			}
		}
		return okWeb && okJob && okCNI
	}, e)

	removePods(updates, web, job, cni)
	waitFor(t, ctx, "runtime empty", runtimeEmpty(ctx, rt), e)
}

// waitFor polls ok every 100 ms until it holds; it fails t, showing e's
// pods, if ctx ends first.
func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool, e *engine.Engine) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s; pods:\n%s", what, formatPods(e.Pods()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitPhase waits (waitFor) until e publishes the pod named name in phase.
func waitPhase(t *testing.T, ctx context.Context, e *engine.Engine, name string, phase v1.PodPhase) {
	t.Helper()
	waitFor(t, ctx, name+" "+string(phase), func() bool { return phaseOf(e, name) == phase }, e)
}

// phaseOf is the phase e publishes for the pod named name, "" if none.
func phaseOf(e *engine.Engine, name string) v1.PodPhase {
	if p := podNamed(e, name); p != nil {
		return p.Status.Phase
	}
	return ""
}

// podNamed is e's newest published copy of the pod named name, nil if e
// publishes none.
func podNamed(e *engine.Engine, name string) *v1.Pod {
	for _, p := range e.Pods() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// mainStatus is the status of container main (shPod's) of the pod named
// name as e publishes it; the zero status while e publishes none.
func mainStatus(e *engine.Engine, name string) v1.ContainerStatus {
	if p := podNamed(e, name); p != nil {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "main" {
				return cs
			}
		}
	}
	return v1.ContainerStatus{}
}

// BenchmarkContainerdBurst starts N hostNetwork busybox pods through the
// engine on a real containerd and reports the time until all are Running
// and, after their removal, until the runtime is empty. Compare with the
// direct-CRI floor (cri BenchmarkFloor, test/e2e BenchmarkBurst).
func BenchmarkContainerdBurst(b *testing.B) { benchmarkBursts(b, 1, 30, 100) }

// BenchmarkContainerdPodOfFour is the burst of pods of four containers each:
// kubelet's SyncPod, and speclet's, starts a pod's containers one after the
// other, so a pod's start is the sum of its containers'.
func BenchmarkContainerdPodOfFour(b *testing.B) { benchmarkBursts(b, 4, 1, 10) }

// benchmarkBursts runs containerdBurst for each count of pods of ctrs
// containers, reporting the mean start-all and remove-all times.
func benchmarkBursts(b *testing.B, ctrs int, counts ...int) {
	c := harness.ForTest(b)
	for _, n := range counts {
		b.Run("N="+strconv.Itoa(n), func(b *testing.B) {
			var start, remove time.Duration
			for i := 0; b.Loop(); i++ {
				s, r := containerdBurst(b, c, n, ctrs, i)
				start += s
				remove += r
			}
			b.ReportMetric(start.Seconds()/float64(b.N), "start-all-s")
			b.ReportMetric(remove.Seconds()/float64(b.N), "remove-all-s")
		})
	}
}

// containerdBurst starts n pods of ctrs sleeping containers each and
// returns the time until all are Running and, after their removal, until
// the runtime is empty.
func containerdBurst(b *testing.B, c *harness.Containerd, n, ctrs, iter int) (startAll, removeAll time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	reg := prometheus.NewRegistry()
	rt, err := cri.Dial(ctx, c.Endpoint, cri.WithMetrics(reg))
	if err != nil {
		b.Fatal(err)
	}
	e, err := engine.New(engine.Config{Runtime: rt, RootDir: filepath.Join(b.TempDir(), "root"), NodeName: "node",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	if os.Getenv("SPECLET_BENCH_OPS") != "" {
		defer printOps(b, reg)
	}
	updates := make(chan config.PodUpdate, 1)
	done := make(chan error, 1)
	rctx, stop := context.WithCancel(ctx)
	go func() { done <- e.Run(rctx, updates) }()
	defer func() { stop(); <-done }()
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = shPod(c, fmt.Sprintf("burst-%d-%03d", iter, i), v1.RestartPolicyAlways, 1, "")
		pods[i].Spec.Containers[0].Command = []string{"sleep", "3600"} // no shell: one process per container
		for k := 1; k < ctrs; k++ {
			ctr := pods[i].Spec.Containers[0]
			ctr.Name = fmt.Sprintf("c%d", k)
			pods[i].Spec.Containers = append(pods[i].Spec.Containers, ctr)
		}
	}
	t0 := time.Now()
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: pods, Source: config.SourceFile}
	for running(e) < n {
		if ctx.Err() != nil {
			b.Fatalf("only %d of %d pods Running", running(e), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	startAll = time.Since(t0)
	t1 := time.Now()
	updates <- config.PodUpdate{Op: config.OpRemove, Pods: pods, Source: config.SourceFile}
	for {
		sbs, err1 := rt.ListPodSandbox(ctx, nil)
		cs, err2 := rt.ListContainers(ctx, nil)
		if err1 == nil && err2 == nil && len(sbs) == 0 && len(cs) == 0 {
			break
		}
		if ctx.Err() != nil {
			b.Fatalf("runtime not empty after removal: %d sandboxes, %d containers", len(sbs), len(cs))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return startAll, time.Since(t1)
}

// running counts the declared pods whose published phase is Running (what
// GET /pods shows).
func running(e *engine.Engine) int {
	n := 0
	for _, p := range e.Pods() {
		if p.Status.Phase == v1.PodRunning {
			n++
		}
	}
	return n
}

// printOps logs the count and mean latency of every CRI call the engine
// made (SPECLET_BENCH_OPS=1), to see where a burst spends its time.
func printOps(b *testing.B, reg *prometheus.Registry) {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "speclet_runtime_operations_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			fmt.Fprintf(os.Stderr, "%-20s n=%4d mean=%6.3fs\n", m.GetLabel()[0].GetValue(), h.GetSampleCount(), h.GetSampleSum()/float64(h.GetSampleCount()))
		}
	}
}

// dialContainerd connects to the harness containerd c for a test; the
// connection closes when the test ends.
func dialContainerd(ctx context.Context, t *testing.T, c *harness.Containerd) cri.Full {
	t.Helper()
	rt, err := cri.Dial(ctx, c.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// runEngine runs e's sync loop on ctx, fed by the returned channel (of
// capacity buf), until stop is called; stop waits for Run to return.
func runEngine(ctx context.Context, e *engine.Engine, buf int) (updates chan config.PodUpdate, stop func()) {
	updates = make(chan config.PodUpdate, buf)
	done := make(chan error, 1)
	rctx, cancel := context.WithCancel(ctx)
	go func() { done <- e.Run(rctx, updates) }()
	return updates, func() { cancel(); <-done }
}

// startEngine runs an engine on the harness containerd c until the test
// ends, configured by newEngine. It returns a runtime client of its own
// (dialled on ctx), the engine and the channel of its pod updates.
func startEngine(ctx context.Context, t *testing.T, c *harness.Containerd, cfg engine.Config) (cri.Full, *engine.Engine, chan config.PodUpdate) {
	t.Helper()
	rt := dialContainerd(ctx, t, c)
	e := newEngine(t, c, cfg)
	updates, stop := runEngine(ctx, e, 4)
	t.Cleanup(stop)
	return rt, e, updates
}

// startPods starts an engine as startEngine does and declares pods to it
// from the file source.
func startPods(ctx context.Context, t *testing.T, c *harness.Containerd, cfg engine.Config, pods ...*v1.Pod) (cri.Full, *engine.Engine, chan config.PodUpdate) {
	t.Helper()
	rt, e, updates := startEngine(ctx, t, c, cfg)
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: pods, Source: config.SourceFile}
	return rt, e, updates
}

// removePods withdraws pods that were declared from the file source
// (startPods).
func removePods(updates chan<- config.PodUpdate, pods ...*v1.Pod) {
	updates <- config.PodUpdate{Op: config.OpRemove, Pods: pods, Source: config.SourceFile}
}

// newEngine returns an engine of cfg on the harness containerd c, with
// what cfg leaves empty filled in: the runtime (c's, audited:
// suite.Runtime), a RootDir under the test's directory, NodeName "node", a
// logger that discards; and its Steps counted in the suite's row coverage.
func newEngine(t *testing.T, c *harness.Containerd, cfg engine.Config) *engine.Engine {
	t.Helper()
	if cfg.Runtime == nil {
		cfg.Runtime = suite.Runtime(t, c.Endpoint)
	}
	if cfg.RootDir == "" {
		cfg.RootDir = filepath.Join(t.TempDir(), "root")
	}
	if cfg.NodeName == "" {
		cfg.NodeName = "node"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Steps = func(s engine.Step) { suite.Took(s.Machine, s.Row, s.Choices) }
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// gone reports whether nothing is at path (not even a dangling link).
func gone(path string) func() bool {
	return func() bool {
		_, err := os.Lstat(path)
		return os.IsNotExist(err)
	}
}

// runtimeEmpty reports whether rt lists no sandbox and no container (false
// when it does not answer).
func runtimeEmpty(ctx context.Context, rt cri.Runtime) func() bool {
	return func() bool {
		sbs, err1 := rt.ListPodSandbox(ctx, nil)
		cs, err2 := rt.ListContainers(ctx, nil)
		return err1 == nil && err2 == nil && len(sbs) == 0 && len(cs) == 0
	}
}
