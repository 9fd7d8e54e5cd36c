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
	rec := h.Add(t0, KindNames(k), "app", row, []int{choice}, c.To.String(), t0)
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
		h.Add(t0.Add(time.Duration(i)*time.Second), KindNames(k), "", i, nil, "x", t0)
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
	h.Add(t0, KindNames(&fsm.SandboxKind), "", 0, nil, "creating", t0)
	if ms := h.States(); len(ms) != 2 || ms[1].Machine != "sandbox" || ms[1].State != "creating" {
		t.Errorf("machines %+v, want pod then sandbox creating", ms)
	}
	if ms, trs := h.Snapshot(false); len(ms) != 2 || trs != nil {
		t.Errorf("snapshot without history: %d machines, %d transitions; want 2 and none", len(ms), len(trs))
	}
}

// TestRingKeepsNewest: past its growth steps and wrapped twice, the ring
// keeps the newest Max transitions, oldest first, and SetActions reaches
// a kept record by its Ref and leaves a dropped one alone.
func TestRingKeepsNewest(t *testing.T) {
	k := &fsm.PodKind
	const max, n = 21, 50
	h := Log{Max: max}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	refs := make([]Ref, n)
	for i := range n {
		refs[i] = h.Add(t0.Add(time.Duration(i)*time.Second), KindNames(k), "", i%len(k.Transitions), nil, "x", t0)
	}
	h.SetActions(refs[n-max-1], []ActionResult{{Action: "dropped", Error: "x"}})
	h.SetActions(refs[n-max], []ActionResult{{Action: "oldest", Error: "x"}})
	h.SetActions(refs[n-1], []ActionResult{{Action: "newest", Error: "x"}})
	_, trs := h.Snapshot(true)
	if len(trs) != max {
		t.Fatalf("kept %d transitions, want %d", len(trs), max)
	}
	for j, tr := range trs {
		i := n - max + j
		if want := t0.Add(time.Duration(i) * time.Second); !tr.Time.Equal(want) || tr.Event != k.Transitions[i%len(k.Transitions)].Event.String() {
			t.Errorf("transition %d: %v %s, want step %d at %v", j, tr.Time, tr.Event, i, want)
		}
		want := ""
		switch j {
		case 0:
			want = "oldest"
		case max - 1:
			want = "newest"
		}
		if got := ""; len(tr.Actions) > 0 {
			got = tr.Actions[0].Action
			if got != want {
				t.Errorf("transition %d: actions %v, want %q", j, tr.Actions, want)
			}
		} else if want != "" {
			t.Errorf("transition %d: no actions, want %q", j, want)
		}
	}
}

// TestLogKeepsWhatDoesNotFit: a time of the clock (with its monotonic
// reading, in Local), three choice branches and a 300th instance come back
// as they went in.
func TestLogKeepsWhatDoesNotFit(t *testing.T) {
	k := &fsm.ContainerKind
	var h Log
	now := time.Now()
	for i := range 300 {
		h.Add(now.Add(time.Duration(i)), KindNames(k), fmt.Sprint("c", i), 0, nil, "x", now)
	}
	h.Add(now, KindNames(k), "c299", 1, []int{3, 1, 0}, "x", now)
	_, trs := h.Snapshot(true)
	last := trs[len(trs)-1]
	if len(last.Choices) != 3 || last.Instance != "c299" || last.To != k.Choices[0].To.String() {
		t.Errorf("last transition %+v, want instance c299 through choices 3, 1, 0", last)
	}
	for _, tr := range trs[:len(trs)-1] {
		i := 300 - PerPod + 1
		fmt.Sscanf(tr.Instance, "c%d", &i)
		want, _ := now.Add(time.Duration(i)).MarshalJSON()
		if got, _ := tr.Time.MarshalJSON(); string(got) != string(want) || tr.Instance != fmt.Sprint("c", i) {
			t.Errorf("transition of %s at %s, want c%d at %s", tr.Instance, got, i, want)
		}
	}
}
