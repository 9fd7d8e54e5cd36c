package fsm

import (
	"context"
	"testing"

	"github.com/looplab/fsm"
)

// BenchmarkFire measures one Fire (guards evaluated, looplab transition,
// actions collected) per op.
func BenchmarkFire(b *testing.B) {
	b.Run("pod/sync_cycle", func(b *testing.B) {
		// synced -sync-> syncing -sync_ok-> synced: two external transitions.
		m := NewPodMachineAt(PodStateSynced, guards{})
		evs := [2]PodEvent{PodEventSync, PodEventSyncOk}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := m.Fire(evs[i&1]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pod/internal", func(b *testing.B) {
		// An update while terminating: internal, looplab is not involved.
		m := NewPodMachineAt(PodStateTerminating, guards{})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Fire(PodEventUpdate); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("container/restart_cycle", func(b *testing.B) {
		// running -died-> exited -exit_recorded-> (deciding, choice)
		// crashloop_backoff -backoff_done-> waiting -start-> checking_image
		// -image_present-> creating -created-> starting -started-> running.
		m := NewContainerMachineAt(ContainerStateRunning, guards{"restart_allowed": true})
		evs := [7]ContainerEvent{ContainerEventDied, ContainerEventExitRecorded, ContainerEventBackoffDone,
			ContainerEventStart, ContainerEventImagePresent, ContainerEventCreated, ContainerEventStarted}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := m.Fire(evs[i%len(evs)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("container/refused", func(b *testing.B) {
		// An event with no transition: the error path.
		m := NewContainerMachineAt(ContainerStateRemoved, guards{})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Fire(ContainerEventStart); err == nil {
				b.Fatal("removed container accepted start")
			}
		}
	})
}

// BenchmarkState measures State, which reads the state from looplab/fsm
// (Current, under looplab's read lock) and maps its name back to the typed
// state.
func BenchmarkState(b *testing.B) {
	m := NewContainerMachineAt(ContainerStateRunning, guards{})
	b.ReportAllocs()
	for b.Loop() {
		if m.State() != ContainerStateRunning {
			b.Fatal("not running")
		}
	}
}

// BenchmarkNewMachine measures building a machine (one per pod, one per
// container).
func BenchmarkNewMachine(b *testing.B) {
	b.Run("pod", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = NewPodMachine(guards{})
		}
	})
	b.Run("container", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = NewContainerMachine(guards{})
		}
	})
}

// BenchmarkLooplabEvent is the floor: one bare looplab/fsm Event between two
// states, no guards, no tables.
func BenchmarkLooplabEvent(b *testing.B) {
	f := fsm.NewFSM("a", fsm.Events{
		{Name: "ab", Src: []string{"a"}, Dst: "b"},
		{Name: "ba", Src: []string{"b"}, Dst: "a"},
	}, nil)
	evs := [2]string{"ab", "ba"}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := f.Event(ctx, evs[i&1]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunAction measures the generated dispatch, which tags the context
// with the action it runs, against running the action's operation directly;
// "bound" is a bound machine's Run, through its Impl's Exec.
func BenchmarkRunAction(b *testing.B) {
	r := &recorder{}
	exec := r.exec
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.ran = r.ran[:0]
			_ = r.exec(ctx, r.StopSandbox())
		}
	})
	b.Run("bound", func(b *testing.B) {
		m := BindPodMachine(PodStateSynced, boundRecorder{guards{}, r})
		b.ReportAllocs()
		for b.Loop() {
			r.ran = r.ran[:0]
			_ = m.Run(ctx, PodActionStopSandbox)
		}
	})
	b.Run("dispatch", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.ran = r.ran[:0]
			_ = RunPodAction(ctx, r, exec, PodActionStopSandbox)
		}
	})
}

// boundRecorder is a recorder bound to a machine: guards, and its exec as
// the Impl's Exec.
type boundRecorder struct {
	guards
	*recorder
}

func (b boundRecorder) Exec(ctx context.Context, name string) error { return b.exec(ctx, name) }
