package fsm

import (
	"reflect"
	"slices"
	"testing"

	looplab "github.com/looplab/fsm"
)

// TestLooplabHoldsTheState moves the looplab/fsm machine behind the
// generated API's back (looplab's SetState) and checks that State, Timers,
// Can and Fire all follow it: the machine has no state of its own.
func TestLooplabHoldsTheState(t *testing.T) {
	m := NewPodMachine(guards{})
	if got := m.m.fsm.Current(); got != PodInitialState.String() {
		t.Fatalf("new machine: looplab in %q, want %q", got, PodInitialState)
	}
	for _, s := range PodStates {
		m.m.fsm.SetState(s.String())
		if got := m.State(); got != s {
			t.Errorf("looplab set to %s: State() = %s", s, got)
		}
		if got, want := m.Timers(), PodStateTimers[s]; !slices.Equal(got, want) {
			t.Errorf("looplab set to %s: Timers() = %v, want %v", s, got, want)
		}
	}

	// From synced (set in looplab only), sync leaves synced for syncing.
	m.m.fsm.SetState(PodStateSynced.String())
	if m.Can(PodEventSyncOk) || !m.Can(PodEventSync) {
		t.Fatalf("in synced (set in looplab): Can(sync_ok) = %v, Can(sync) = %v", m.Can(PodEventSyncOk), m.Can(PodEventSync))
	}
	st, err := m.Fire(PodEventSync)
	if err != nil {
		t.Fatal(err)
	}
	if st.From != PodStateSynced || st.To != PodStateSyncing {
		t.Fatalf("sync from synced (set in looplab): %s", st)
	}
	if got := m.m.fsm.Current(); got != PodStateSyncing.String() {
		t.Fatalf("after %s: looplab in %q", st, got)
	}
}

// TestFireMovesLooplab checks that looplab is in the step's To after each
// Fire: after an external transition, a self-transition (which looplab does
// not have: looplab stays), an internal one and a pass through a choice.
func TestFireMovesLooplab(t *testing.T) {
	p := NewPodMachineAt(PodStateTerminating, guards{})
	for _, ev := range []PodEvent{PodEventSync, PodEventUpdate, PodEventKill} { // self, internal, internal
		st, err := p.Fire(ev)
		if err != nil {
			t.Fatal(err)
		}
		if st.From != PodStateTerminating || st.To != PodStateTerminating {
			t.Fatalf("%s in terminating: %s", ev, st)
		}
		if got := p.m.fsm.Current(); got != "terminating" {
			t.Fatalf("after %s: looplab in %q", st, got)
		}
	}

	c := NewContainerMachineAt(ContainerStateRunning, guards{"restart_allowed": true})
	st, err := c.Fire(ContainerEventDied)
	if err != nil {
		t.Fatal(err)
	}
	st, err = c.Fire(ContainerEventExitRecorded) // exited -> deciding (choice) -> ...
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Choices) == 0 {
		t.Fatalf("exit_recorded passed no choice: %s", st)
	}
	if got := c.m.fsm.Current(); got != st.To.String() || c.State() != st.To {
		t.Fatalf("after %s: looplab in %q, State() = %s", st, got, c.State())
	}
}

// TestMachineHasNoStateField checks the core's machine struct of every
// generated machine: no field of the machine's state type beside looplab.
func TestMachineHasNoStateField(t *testing.T) {
	for _, c := range []struct {
		machine reflect.Type
		state   reflect.Type
	}{
		{reflect.TypeFor[PodMachine](), reflect.TypeFor[PodState]()},
		{reflect.TypeFor[ContainerMachine](), reflect.TypeFor[ContainerState]()},
		{reflect.TypeFor[SandboxMachine](), reflect.TypeFor[SandboxState]()},
		{reflect.TypeFor[ProbeMachine](), reflect.TypeFor[ProbeState]()},
		{reflect.TypeFor[NodeMachine](), reflect.TypeFor[NodeState]()},
	} {
		f, ok := c.machine.FieldByName("m")
		if !ok {
			t.Fatalf("%s has no field m", c.machine)
		}
		typ := f.Type
		for i := range typ.NumField() {
			if f := typ.Field(i); f.Type == c.state {
				t.Errorf("%s has a field %s of type %s: looplab/fsm holds the state", typ, f.Name, f.Type)
			}
		}
	}
}

// TestZeroLooplabHoldsTheState: the core's looplab machine is a zero
// fsm.FSM (not one of NewFSM); it holds the state SetState gives it, which
// a new machine and State read back.
func TestZeroLooplabHoldsTheState(t *testing.T) {
	var f looplab.FSM
	for _, s := range []string{"a", "b"} {
		f.SetState(s)
		if got := f.Current(); got != s || !f.Is(s) {
			t.Fatalf("zero looplab FSM set to %q: Current() = %q", s, got)
		}
	}
	for _, s := range PodStates {
		if m := NewPodMachineAt(s, guards{}); m.m.fsm.Current() != s.String() || m.State() != s {
			t.Errorf("NewPodMachineAt(%s): looplab in %q, State() = %s", s, m.m.fsm.Current(), m.State())
		}
	}
}
