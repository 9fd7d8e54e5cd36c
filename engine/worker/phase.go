// The pod phase users see, from the containers' views.

package worker

import (
	"github.com/speclet/speclet/fsm"
)

// terminated: every container of the pod stopped for good (the pod machine
// completed, terminated or finished); spec/system.hcl's phase block lists
// the same states (TestPhaseBlockMatchesEngine).
func (s *podState) terminated() bool {
	switch s.machine.State() {
	case fsm.PodStateCompleted, fsm.PodStateTerminated, fsm.PodStateFinished:
		return true
	}
	return false
}
