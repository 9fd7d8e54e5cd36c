package test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/speclet/speclet/fsm"
	"github.com/speclet/speclet/spec"
	"github.com/speclet/speclet/verify"
)

// guards answers every guard from a map, for both generated machines.
type guards map[string]bool

func (g guards) AdmissionRefused() bool     { return g["admission_refused"] }
func (g guards) NameTaken() bool            { return g["name_taken"] }
func (g guards) PodDone() bool              { return g["pod_done"] }
func (g guards) AllContainersStopped() bool { return g["all_containers_stopped"] }
func (g guards) PodTerminating() bool       { return g["pod_terminating"] }
func (g guards) StartBlocked() bool         { return g["start_blocked"] }
func (g guards) RecreateForbidden() bool    { return g["recreate_forbidden"] }
func (g guards) RestartAllowed() bool       { return g["restart_allowed"] }
func (g guards) SpecChanged() bool          { return g["spec_changed"] }
func (g guards) ImageInvalid() bool         { return g["image_invalid"] }
func (g guards) PullAlways() bool           { return g["pull_always"] }
func (g guards) PullNever() bool            { return g["pull_never"] }
func (g guards) FirstProbeKill() bool       { return g["first_probe_kill"] }

func names[T fmt.Stringer](xs []T) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x.String())
	}
	return out
}

// TestVerifyStepMatchesFSM: for every state, event and guard valuation of
// the pod and container machines, the step the verifier explores is the
// step the generated machine takes.
func TestVerifyStepMatchesFSM(t *testing.T) {
	s, diags := spec.Parse(spec.Embedded())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	type fired struct {
		path, actions []string
		ok            bool
	}
	fire := map[string]func(state, event string, g guards) (fired, error){
		"pod": func(state, event string, g guards) (fired, error) {
			st, _ := fsm.ParsePodState(state)
			ev, _ := fsm.ParsePodEvent(event)
			step, err := fsm.NewPodMachineAt(st, g).Fire(ev)
			if errors.Is(err, fsm.ErrNoTransition) {
				return fired{}, nil
			}
			return fired{names(step.Path), names(step.Actions), true}, err
		},
		"container": func(state, event string, g guards) (fired, error) {
			st, _ := fsm.ParseContainerState(state)
			ev, _ := fsm.ParseContainerEvent(event)
			step, err := fsm.NewContainerMachineAt(st, g).Fire(ev)
			if errors.Is(err, fsm.ErrNoTransition) {
				return fired{}, nil
			}
			return fired{names(step.Path), names(step.Actions), true}, err
		},
		"sandbox": func(state, event string, g guards) (fired, error) {
			st, _ := fsm.ParseSandboxState(state)
			ev, _ := fsm.ParseSandboxEvent(event)
			step, err := fsm.NewSandboxMachineAt(st, g).Fire(ev)
			if errors.Is(err, fsm.ErrNoTransition) {
				return fired{}, nil
			}
			return fired{names(step.Path), names(step.Actions), true}, err
		},
	}
	n := 0
	for name, fireFSM := range fire {
		m := s.Machine(name)
		for _, st := range m.States {
			for _, ev := range m.Events {
				for bits := range 1 << len(m.Guards) {
					g := guards{}
					for i, gd := range m.Guards {
						g[gd.Name] = bits&(1<<i) != 0
					}
					want, err := fireFSM(st.Name, ev.Name, g)
					if err != nil {
						t.Fatalf("%s %s on %s: fsm: %v", name, st.Name, ev.Name, err)
					}
					path, actions, ok, err := verify.Step(s, name, st.Name, ev.Name, g)
					if err != nil {
						t.Fatalf("%s %s on %s: verify: %v", name, st.Name, ev.Name, err)
					}
					if ok != want.ok || !slices.Equal(path, want.path) || !slices.Equal(actions, want.actions) {
						t.Errorf("%s %s on %s with %v: verify %v %v %v, fsm %v %v %v", name, st.Name, ev.Name, g, ok, path, actions, want.ok, want.path, want.actions)
					}
					n++
				}
			}
		}
	}
	t.Logf("%d steps compared", n)
}
