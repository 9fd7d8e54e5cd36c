package history

import (
	"fmt"
	"testing"
	"time"

	"github.com/speclet/speclet/fsm"
)

// TestLogNamesRowsWhenRead: a record is named from its kind's tables (from,
// event, guard, to after the choice branches passed) when the log is read,
// and carries its time, instance and the results attached later.
func TestLogNamesRowsWhenRead(t *testing.T) {
	k := &fsm.ContainerKind
	row, choice := -1, -1
	for i, c := range k.Choices {
		for j, r := range k.Transitions {
			if r.To == c.State && row < 0 {
				row, choice = j, i
			}
		}
	}
	if row < 0 {
		t.Fatal("the container kind has no row into a choice state")
	}
	r := &k.Transitions[row]
	c := &k.Choices[choice]
	var h Log
	h.SetMachines([]MachineState{{Machine: "container", Instance: "app", State: r.From.String()}})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := h.Add(NewRecord(t0, KindNames(k), "app", row, []int{choice}), c.To.String(), t0)
	h.SetActions(rec, []ActionResult{{Action: "record_exit", Error: "boom"}})

	ms, trs := h.Snapshot(true)
	if len(trs) != 1 {
		t.Fatalf("%d transitions, want 1", len(trs))
	}
	got := trs[0]
	want := Transition{Time: t0, Machine: "container", Instance: "app", From: r.From.String(), Event: r.Event.String(),
		To: c.To.String(), Choices: []string{fsm.Branch[fsm.ContainerState, fsm.ContainerGuard]{Guard: c.Guard, HasGuard: c.HasGuard, To: c.To}.String()},
		Actions: []ActionResult{{Action: "record_exit", Error: "boom"}}}
	if r.HasGuard {
		want.Guard = r.Guard.String()
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("transition\n%+v\nwant\n%+v", got, want)
	}
	if len(ms) != 1 || ms[0].State != c.To.String() || !ms[0].Since.Equal(t0) {
		t.Errorf("machines %+v, want container/app in %s since %v", ms, c.To, t0)
	}
}

// TestLogIsBounded: the log keeps the newest Max transitions, oldest first;
// before SetMachines listed the machines, a step lists none (a pod is not
// shown with a partial set), after it a machine not listed is appended.
func TestLogIsBounded(t *testing.T) {
	k := &fsm.PodKind
	h := Log{Max: 2}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 3; i++ {
		h.Add(NewRecord(t0.Add(time.Duration(i)*time.Second), KindNames(k), "", i, nil), "x", t0)
	}
	if ms := h.States(); len(ms) != 0 {
		t.Errorf("machines %+v before SetMachines, want none", ms)
	}
	_, trs := h.Snapshot(true)
	if len(trs) != 2 || trs[0].Time.Second() != 1 || trs[1].Time.Second() != 2 {
		t.Fatalf("kept %+v, want the transitions of seconds 1 and 2, oldest first", trs)
	}
	if want := k.Transitions[1].Event.String(); trs[0].Event != want {
		t.Errorf("first kept event %q, want row 1's %q", trs[0].Event, want)
	}
	h.SetMachines([]MachineState{{Machine: "pod", State: "pending"}})
	h.Add(NewRecord(t0, KindNames(&fsm.SandboxKind), "", 0, nil), "creating", t0)
	if ms := h.States(); len(ms) != 2 || ms[1].Machine != "sandbox" || ms[1].State != "creating" {
		t.Errorf("machines %+v, want pod then sandbox creating", ms)
	}
	if ms, trs := h.Snapshot(false); len(ms) != 2 || trs != nil {
		t.Errorf("snapshot without history: %d machines, %d transitions; want 2 and none", len(ms), len(trs))
	}
}
