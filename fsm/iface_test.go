package fsm

import (
	"context"
	"strings"
	"testing"
)

// drive is the engine's fire loop in small, written once against the
// Machine interface: it fires each event, renders the step with its guard
// and choice branches, and runs the step's actions.
func drive[S, E, A, G Enum](ctx context.Context, m Machine[S, E, A, G], evs ...E) ([]string, error) {
	var out []string
	for _, ev := range evs {
		st, err := m.Fire(ev)
		if err != nil {
			return out, err
		}
		line := st.Machine + " " + st.From.String() + " -" + st.Event.String()
		if st.HasGuard {
			line += " [" + st.Guard.String() + "]"
		}
		line += "-> " + st.To.String()
		for _, c := range st.Choices {
			line += " via " + m.Branch(c).String()
		}
		if !st.Entered() {
			line += " (internal)"
		}
		for _, a := range append([]A(nil), st.Actions...) {
			line += " / " + a.String()
			if err := m.Run(ctx, a); err != nil {
				line += " (" + err.Error() + ")"
			}
		}
		out = append(out, line)
	}
	return out, nil
}

// podImpl is a pod machine's implementation for Bind: map guards, tagged
// actions, and runRec to run them.
type podImpl struct {
	guards
	*tagRecorder
}

func (podImpl) Exec(ctx context.Context, o recOp) error { return runRec(ctx, o) }

// TestMachineInterface: one generic function runs the pod and the container
// machine; the steps carry the machine's name, the row's guard and the
// choice branches; Run runs on what Bind bound, and an unbound machine runs
// nothing.
func TestMachineInterface(t *testing.T) {
	ctx := context.Background()
	rec := &tagRecorder{}
	p := BindPodMachine(PodStatePending, podImpl{guards{"name_taken": true}, rec})
	if p.Name() != PodMachineName {
		t.Errorf("Name() = %q", p.Name())
	}
	got, err := drive(ctx, p, PodEventUpdate)
	if err != nil {
		t.Fatal(err)
	}
	if want := "pod pending -update [name_taken]-> waiting_to_start"; !strings.HasPrefix(strings.Join(got, "\n"), want) {
		t.Errorf("pod steps:\n%s\nwant to start with %q", strings.Join(got, "\n"), want)
	}
	p2 := BindPodMachine(PodStateSynced, podImpl{guards{}, rec})
	if _, err := drive(ctx, p2, PodEventSync); err != nil {
		t.Fatal(err)
	}
	if tags := strings.Join(rec.got, " "); !strings.Contains(tags, "pod/sync_pod") {
		t.Errorf("Run ran %q, want pod/sync_pod among them", tags)
	}

	c := NewContainerMachineAt(ContainerStateRunning, guards{"restart_allowed": true})
	got, err = drive(ctx, c, ContainerEventDied, ContainerEventExitRecorded)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(got, "\n")
	if !strings.Contains(joined, "container exited -exit_recorded-> crashloop_backoff via [restart_allowed] -> restarting via [otherwise] -> crashloop_backoff") {
		t.Errorf("container steps:\n%s", joined)
	}
	if !strings.Contains(joined, "no implementation bound") {
		t.Errorf("an unbound machine ran its actions:\n%s", joined)
	}
	if b := c.Branch(len(ContainerChoiceTable) - 1); b.HasGuard || !strings.HasPrefix(b.String(), "[otherwise] -> ") {
		t.Errorf("last branch %+v renders %q, want an otherwise branch", b, b.String())
	}
}
