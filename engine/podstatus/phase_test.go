package podstatus

import (
	"testing"

	"github.com/speclet/speclet/spec/podphase"
)

// TestPhaseFacts: how a container view reads as the facts podphase.Of
// takes (the model reads the same facts from the machines' states, see
// spec/system.hcl's phase block).
func TestPhaseFacts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		view       Container
		wantState  string
		wantFailed bool
	}{
		{"waiting, never ran", Container{Phase: Waiting}, "not started", false},
		{"running", Container{Phase: Running}, "runs", false},
		{"running again after a failure", Container{Phase: Running, Last: &Termination{ExitCode: 1}}, "runs", false},
		{"terminated 0", Container{Phase: Terminated, Current: &Termination{ExitCode: 0}}, "exited", false},
		{"terminated 1", Container{Phase: Terminated, Current: &Termination{ExitCode: 1}}, "exited", true},
		{"terminated, exit unknown", Container{Phase: Terminated}, "exited", true},
		{"CrashLoopBackOff after 0", Container{Phase: Waiting, WaitingReason: "CrashLoopBackOff", Last: &Termination{ExitCode: 0}}, "exited", false},
		{"CrashLoopBackOff after 2", Container{Phase: Waiting, WaitingReason: "CrashLoopBackOff", Last: &Termination{ExitCode: 2}}, "exited", true},
	} {
		f := phaseFacts(podphase.Regular, &tc.view)
		state := map[podphase.State]string{podphase.NotStarted: "not started", podphase.Runs: "runs", podphase.Exited: "exited"}[f.State]
		if state != tc.wantState || f.Failed != tc.wantFailed || f.Kind != podphase.Regular {
			t.Errorf("%s: facts %+v (%s), want %s, failed %v", tc.name, f, state, tc.wantState, tc.wantFailed)
		}
	}
}
