package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
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
		w := &podWorker{h: &e.host}
		s := &podState{w: w, h: &e.host, pod: &v1.Pod{}}
		s.Bind(s)
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
