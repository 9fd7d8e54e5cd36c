package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/pleg"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/podstatus"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/fsm"
)

func benchPod(i int) *v1.Pod {
	g := int64(1)
	name := fmt.Sprintf("p%05d", i)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
		Spec: v1.PodSpec{HostNetwork: true, TerminationGracePeriodSeconds: &g, RestartPolicy: v1.RestartPolicyAlways,
			Containers: []v1.Container{{Name: "app", Image: "busybox:latest", ImagePullPolicy: v1.PullIfNotPresent}}},
	}
}

// BenchmarkStatus measures computing a pod status from its view (one init
// container, two regular containers).
func BenchmarkStatus(b *testing.B) {
	pod := benchPod(0)
	now := time.Now()
	v := &podView{Pod: pod, SandboxReady: true, StartTime: now,
		Inits: []containerView{{Name: "init", Init: true, Phase: phaseTerminated, Current: &termination{ExitCode: 0}}},
		Containers: []containerView{
			{Name: "app", Phase: phaseRunning, Ready: true, StartedAt: now, ContainerID: "abc"},
			{Name: "side", Phase: phaseWaiting, WaitingReason: ReasonCrashLoopBackOff, Last: &termination{ExitCode: 1}},
		}}
	var prev *v1.PodStatus
	b.ReportAllocs()
	for b.Loop() {
		st := podstatus.Compute(prev, v, now)
		prev = &st
	}
}

// BenchmarkRelist measures one PLEG relist against the simulated runtime
// holding N running pods (ListContainers over gRPC plus the diff).
func BenchmarkRelist(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run("pods="+strconv.Itoa(n), func(b *testing.B) {
			_, rt := startSim(b)
			ctx := context.Background()
			for i := 0; i < n; i++ {
				pod := benchPod(i)
				cfg, _ := sandboxConfig(podspec.Node{RootDir: b.TempDir()}, pod, 0, "")
				cfg.LogDirectory = ""
				sb, err := rt.RunPodSandbox(ctx, cfg, "")
				if err != nil {
					b.Fatal(err)
				}
				cc, _ := containerConfig(podspec.Node{}, pod, &pod.Spec.Containers[0], 0, "", false, podspec.ImageUser{})
				id, err := rt.CreateContainer(ctx, sb, cc, cfg)
				if err != nil {
					b.Fatal(err)
				}
				if err := rt.StartContainer(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			p := pleg.New(rt, clock.RealClock{}, runtimepods.Identify)
			if _, err := p.Relist(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := p.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	// Twice: the first collection moves sync.Pool contents (gRPC's and
	// protobuf's buffers, as many as calls ran at once) to the victim
	// cache, the second frees them.
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// stackInUse is the memory of the goroutine stacks (a worker per pod).
func stackInUse() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.StackInuse)
}

func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// BenchmarkEngineScale starts N pods on the simulated runtime (real gRPC,
// real clock) and waits until all are Running, then removes them all and
// waits until the runtime is empty. It reports transitions per second over
// the whole run, the live heap per pod (after a collection) and the growth
// of the process RSS per pod (engine and simulated runtime share the
// process; RSS only means something in the first run of a process, as Go
// keeps freed memory). The settled heap is taken again once the runtime
// events queued behind the start are handled (waitSettled).
func BenchmarkEngineScale(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run("pods="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				srv, rt := startSim(b)
				benchScale(b, n, rt, srv.Runtime.Len)
			}
		})
	}
}

// BenchmarkEngineScaleRuntimeApart is BenchmarkEngineScale with the
// simulated runtime served from a process of its own (startSimProcess), as
// containerd runs apart from the kubelet: the heap, RSS and GC it reports
// are the engine's and its client's alone.
func BenchmarkEngineScaleRuntimeApart(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run("pods="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				rt, left := startSimProcess(b)
				benchScale(b, n, rt, left)
			}
		})
	}
}

// benchScale starts n pods on the runtime rt, waits until all are Running
// and settled, then removes them and waits until left counts no sandbox
// and no container in the runtime.
func benchScale(b *testing.B, n int, rt cri.Runtime, left func() (sandboxes, containers int)) {
	reg := prometheus.NewRegistry()
	// Running pods are counted as the workers publish them (pod i is
	// "p%05d"), not by polling the engine, whose scan of every worker would
	// take CPU from the pods it waits for.
	seen := make([]atomic.Bool, n)
	var running atomic.Int64
	allRunning := make(chan struct{})
	published := func(p *v1.Pod) {
		if p.Status.Phase != v1.PodRunning {
			return
		}
		if i, err := strconv.Atoi(p.Name[1:]); err == nil && i < n && !seen[i].Swap(true) && running.Add(1) == int64(n) {
			close(allRunning)
		}
	}
	e, updates, stop := runBenchEngine(b, Config{Runtime: rt, Registerer: reg, PublishedPod: published})
	defer stop()

	heap0 := liveHeap()
	stack0 := stackInUse()
	rss0 := rssBytes()
	stopCPU := profileCPU(b, n)
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = benchPod(i)
	}
	start := time.Now()
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: pods, Source: config.SourceFile}
	<-allRunning
	toRunning := time.Since(start)
	stopCPU()
	heap1 := liveHeap()
	stack1 := stackInUse()
	rss1 := rssBytes()
	profileHeap(b, n, "heap")
	waitSettled(e)
	heap2 := liveHeap()
	profileHeap(b, n, "settled-heap")
	updates <- config.PodUpdate{Op: config.OpRemove, Pods: pods, Source: config.SourceFile}
	for {
		sbs, cs := left()
		if sbs == 0 && cs == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	total := time.Since(start)
	b.ReportMetric(toRunning.Seconds(), "s-to-running")
	b.ReportMetric((total - toRunning).Seconds(), "s-to-removed")
	b.ReportMetric(transitionsTotal(b, reg)/total.Seconds(), "transitions/s")
	b.ReportMetric(float64(heap1-heap0)/float64(n), "heap-bytes/pod")
	b.ReportMetric(float64(heap2-heap0)/float64(n), "settled-heap-bytes/pod")
	b.ReportMetric(float64(stack1-stack0)/float64(n), "stack-bytes/pod")
	b.ReportMetric(float64(rss1-rss0)/float64(n), "rss-bytes/pod")
}

// profileCPU starts a CPU profile of the start of n pods when
// SPECLET_PROFILE_DIR names a directory, as BenchmarkIdleCost does; the
// returned function stops it.
func profileCPU(b *testing.B, n int) func() {
	dir := os.Getenv("SPECLET_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("scale-%d-cpu.pprof", n)))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// profileHeap writes a heap profile (as scale-n-what.pprof: "heap" with all
// n pods running, "settled-heap" once settled) when SPECLET_PROFILE_DIR
// names a directory.
func profileHeap(b *testing.B, n int, what string) {
	dir := os.Getenv("SPECLET_PROFILE_DIR")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("scale-%d-%s.pprof", n, what)))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkEventToStatus measures how long after a container dies in the
// runtime its pod's published status shows it no longer running, with 1,000
// pods on the simulated runtime (its event stream feeds the PLEG). One op is
// one container killed behind the engine's back and seen in the status.
func BenchmarkEventToStatus(b *testing.B) {
	const n = 1000
	_, rt := startSim(b)
	e, updates, stop := runBenchEngine(b, Config{Runtime: rt})
	defer stop()
	ctx := context.Background()
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = benchPod(i)
	}
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: pods, Source: config.SourceFile}
	for e.countRunning() < n {
		time.Sleep(20 * time.Millisecond)
	}
	cs, err := rt.ListContainers(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	if len(cs) < b.N {
		b.Skipf("only %d containers to kill for b.N=%d; use -benchtime=%dx or less", len(cs), b.N, len(cs))
	}
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := cs[i]
		w := e.worker(types.UID(c.Labels[LabelPodUID]), false, nil)
		t0 := time.Now()
		if err := rt.StopContainer(ctx, c.Id, 0); err != nil {
			b.Fatal(err)
		}
		for {
			p := w.snapshot()
			if st := p.Status.ContainerStatuses; len(st) == 1 && st[0].State.Running == nil {
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
		total += time.Since(t0)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/event")
}

// transitionsTotal sums speclet_transitions_total over every label set in reg.
func transitionsTotal(b *testing.B, reg prometheus.Gatherer) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "speclet_transitions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	if n == 0 {
		b.Fatal("speclet_transitions_total: no transitions recorded")
	}
	return n
}

// BenchmarkFireLoop measures one transition through the engine's fire loop
// (engine/fire) on a pod machine cycling synced -sync-> syncing
// -sync_ok-> synced with no actions run: Fire and the pod machine's
// observers (the transition counter, the state-duration histogram, the
// history record, the debug and operator logs, the timers of the state
// entered). "bare" is Fire alone, "loop" without a registry, "loop+metrics"
// with one.
func BenchmarkFireLoop(b *testing.B) {
	run := func(b *testing.B, reg prometheus.Registerer) {
		e, err := New(Config{Runtime: nopRuntime{}, RootDir: b.TempDir(), Registerer: reg, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		w := &podWorker{e: e}
		s := &podState{w: w, e: e, pod: &v1.Pod{}}
		s.machine = fsm.NewPodMachineAt(fsm.PodStateSynced, benchGuards{})
		r := fire.NewRun(s, podObservers)
		m := noActions{s.machine}
		evs := [2]fsm.PodEvent{fsm.PodEventSync, fsm.PodEventSyncOk}
		ctx := context.Background()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			fire.Fire(ctx, m, &r, evs[i%2])
		}
	}
	b.Run("bare", func(b *testing.B) {
		m := fsm.NewPodMachineAt(fsm.PodStateSynced, benchGuards{})
		evs := [2]fsm.PodEvent{fsm.PodEventSync, fsm.PodEventSyncOk}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := m.Fire(evs[i%2]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("loop", func(b *testing.B) { run(b, nil) })
	b.Run("loop+metrics", func(b *testing.B) { run(b, prometheus.NewRegistry()) })
}

// noActions is a pod machine whose steps have no actions: only the loop's
// own cost is measured.
type noActions struct{ *fsm.PodMachine }

func (m noActions) Fire(ev fsm.PodEvent) (fsm.PodStep, error) {
	st, err := m.PodMachine.Fire(ev)
	st.Actions = nil
	return st, err
}

type benchGuards struct{}

func (benchGuards) AdmissionRefused() bool     { return false }
func (benchGuards) NameTaken() bool            { return false }
func (benchGuards) PodDone() bool              { return false }
func (benchGuards) AllContainersStopped() bool { return false }

// nopRuntime satisfies cri.Runtime for engines that never call it.
type nopRuntime struct{ cri.Runtime }
