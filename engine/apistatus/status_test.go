package apistatus

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestMergeKeepsOthersConditions: the engine's status replaces the API's,
// except conditions the engine does not write (the scheduler's, a
// readiness gate's) and fields others own.
func TestMergeKeepsOthersConditions(t *testing.T) {
	api := v1.PodStatus{
		Phase:             v1.PodPending,
		NominatedNodeName: "n1",
		Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
			{Type: "example.com/gate", Status: v1.ConditionFalse},
			{Type: v1.PodReady, Status: v1.ConditionFalse},
		},
	}
	ours := v1.PodStatus{
		Phase:      v1.PodRunning,
		Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
	}
	got := merge(api, ours)
	if got.Phase != v1.PodRunning || got.NominatedNodeName != "n1" {
		t.Errorf("phase %s nominated %q, want Running and n1", got.Phase, got.NominatedNodeName)
	}
	want := map[v1.PodConditionType]v1.ConditionStatus{v1.PodReady: v1.ConditionTrue, v1.PodScheduled: v1.ConditionTrue, "example.com/gate": v1.ConditionFalse}
	if len(got.Conditions) != len(want) {
		t.Fatalf("conditions %+v, want %v", got.Conditions, want)
	}
	for _, c := range got.Conditions {
		if want[c.Type] != c.Status {
			t.Errorf("condition %s = %s, want %s", c.Type, c.Status, want[c.Type])
		}
	}
}
