package schedule

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/speclet/speclet/fsm"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// TestOf: a state's timers run out after their durations from the instant
// it was entered; a negative duration arms none, zero arms one due at once;
// firing one delivers its own event and duration.
func TestOf(t *testing.T) {
	// The pod machine's kinds stand for any machine's.
	ts := []fsm.Timer[fsm.PodEvent, fsm.PodDuration]{
		{Event: fsm.PodEvent(1), After: fsm.PodDuration(0)},
		{Event: fsm.PodEvent(2), After: fsm.PodDuration(1)},
		{Event: fsm.PodEvent(3), After: fsm.PodDuration(2)},
	}
	durs := map[fsm.PodDuration]time.Duration{0: 5 * time.Second, 1: -1, 2: 0}
	var fired []string
	got := Of(ts, at(10), func(d fsm.PodDuration) time.Duration { return durs[d] },
		func(_ context.Context, ev fsm.PodEvent, d fsm.PodDuration) {
			fired = append(fired, ev.String()+" after "+d.String())
		})
	if len(got) != 2 || !got[0].At.Equal(at(15)) || !got[1].At.Equal(at(10)) {
		t.Fatalf("timers %v, want two: at 15 s and at 10 s", got)
	}
	for _, tm := range got {
		tm.Fire(context.Background())
	}
	want := []string{fsm.PodEvent(1).String() + " after " + fsm.PodDuration(0).String(), fsm.PodEvent(3).String() + " after " + fsm.PodDuration(2).String()}
	if !slices.Equal(fired, want) {
		t.Errorf("fired %q, want %q", fired, want)
	}
}

// TestSet: the armed timers of a pod's machines through the life of a
// pod: each machine's new state replaces its own timers only, a timer is
// taken once when due, earliest first, and the filter leaves the others
// armed.
func TestSet(t *testing.T) {
	var fired []string
	timer := func(name string, s float64) Timer {
		return Timer{At: at(s), Fire: func(context.Context) { fired = append(fired, name) }}
	}
	fire := func(ts []Timer) string {
		fired = nil
		for _, tm := range ts {
			tm.Fire(context.Background())
		}
		return strings.Join(fired, ",")
	}
	var s Set
	if s.Due(at(1e6)) || len(s.Take(at(1e6), nil)) != 0 || len(s.armed) != 0 {
		t.Fatal("an empty set has a due timer")
	}
	s.Replace("pod", []Timer{timer("resync", 10), timer("deadline", 30)})
	s.Replace("container/app", []Timer{timer("backoff-app", 5)})
	s.Replace("container/log", []Timer{timer("backoff-log", 5)})
	if len(s.armed) != 4 || s.Due(at(4.999)) || !s.Due(at(5)) {
		t.Fatalf("%d armed; due at 4.999 s: %v, at 5 s: %v; want 4, false, true", len(s.armed), s.Due(at(4.999)), s.Due(at(5)))
	}
	// The container entered a new state: its old timer is gone.
	s.Replace("container/log", []Timer{timer("grace-log", 12)})
	onlyContainers := func(owner string) bool { return strings.HasPrefix(owner, "container/") }
	if got := fire(s.Take(at(11), onlyContainers)); got != "backoff-app" {
		t.Errorf("containers due at 11 s: %q, want backoff-app (resync is the pod's, grace-log not due)", got)
	}
	if got := fire(s.Take(at(12), nil)); got != "resync,grace-log" {
		t.Errorf("due at 12 s: %q, want resync,grace-log (earliest first)", got)
	}
	if got := fire(s.Take(at(12), nil)); got != "" {
		t.Errorf("taken twice: %q", got)
	}
	s.Replace("pod", nil) // a state without timers cancels them
	if len(s.armed) != 0 || s.Due(at(1e6)) {
		t.Errorf("%d armed after the pod's cancel, want 0", len(s.armed))
	}
	// Timers of one instant keep the order they were armed in.
	s.Replace("a", []Timer{timer("a1", 1), timer("a2", 1)})
	s.Replace("b", []Timer{timer("b1", 0.5), timer("b2", 1)})
	if got := fire(s.Take(at(1), nil)); got != "b1,a1,a2,b2" {
		t.Errorf("due at 1 s: %q, want b1,a1,a2,b2", got)
	}
}

func TestEarliest(t *testing.T) {
	for _, tc := range []struct {
		at   []float64
		want int
	}{{nil, -1}, {[]float64{3}, 0}, {[]float64{3, 1, 2}, 1}, {[]float64{2, 1, 1}, 1}} {
		var ts []Timer
		for _, s := range tc.at {
			ts = append(ts, Timer{At: at(s)})
		}
		if got := Earliest(ts); got != tc.want {
			t.Errorf("Earliest(%v) = %d, want %d", tc.at, got, tc.want)
		}
	}
}

// TestTicks: a probe worker's ticks are anchor + n*period; TickAfter is the
// next one strictly after t, TickAtOrAfter may be t itself.
func TestTicks(t *testing.T) {
	const period = 10 * time.Second
	anchor := at(100)
	for _, tc := range []struct {
		t, after, atOrAfter float64
	}{
		{t: 50, after: 100, atOrAfter: 100},  // before the anchor: the anchor
		{t: 100, after: 110, atOrAfter: 100}, // on the anchor
		{t: 101, after: 110, atOrAfter: 110},
		{t: 110, after: 120, atOrAfter: 110}, // on a tick
		{t: 119.999, after: 120, atOrAfter: 120},
		{t: 1000, after: 1010, atOrAfter: 1000},
	} {
		if got := TickAfter(anchor, period, at(tc.t)); !got.Equal(at(tc.after)) {
			t.Errorf("TickAfter(100 s, 10 s, %v s) = %v, want %v s", tc.t, got.Sub(t0), tc.after)
		}
		if got := TickAtOrAfter(anchor, period, at(tc.t)); !got.Equal(at(tc.atOrAfter)) {
			t.Errorf("TickAtOrAfter(100 s, 10 s, %v s) = %v, want %v s", tc.t, got.Sub(t0), tc.atOrAfter)
		}
	}
}
