package worker

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/containers"
	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/internal/suite"
	"github.com/speclet/speclet/engine/podstatus"
	"github.com/speclet/speclet/fsm"
)

// BenchmarkStatus measures computing a pod status from its view (one init
// container, two regular containers).
func BenchmarkStatus(b *testing.B) {
	pod := suite.Pod(0)
	now := time.Now()
	v := &podView{Pod: pod, SandboxReady: true, StartTime: now,
		Inits: []containerView{{Name: "init", Init: true, Phase: phaseTerminated, Current: &termination{ExitCode: 0}}},
		Containers: []containerView{
			{Name: "app", Phase: phaseRunning, Ready: true, StartedAt: now, ContainerID: "abc"},
			{Name: "side", Phase: phaseWaiting, WaitingReason: containers.ReasonCrashLoopBackOff, Last: &termination{ExitCode: 1}},
		}}
	var prev *v1.PodStatus
	b.ReportAllocs()
	for b.Loop() {
		st := podstatus.Compute(prev, v, now)
		prev = &st
	}
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
		h := testHost(b, reg)
		w := &Worker{h: h}
		s := &podState{w: w, h: h, pod: &v1.Pod{}}
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
