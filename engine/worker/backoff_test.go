package worker

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestBackoff: 10 s doubling to the 300 s cap, per key, and back to 10 s
// after 10 minutes without a failure.
func TestBackoff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := NewBackoff(clk, 10*time.Second, 300*time.Second, 10*time.Minute)
	var got []time.Duration
	for range 7 {
		got = append(got, b.Next("a"))
		clk.Step(time.Second)
	}
	want := []time.Duration{10, 20, 40, 80, 160, 300, 300}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Errorf("failure %d: delay %s, want %s", i+1, got[i], want[i]*time.Second)
		}
	}
	if d := b.Next("b"); d != 10*time.Second {
		t.Errorf("another key starts at %s, want 10s", d)
	}
	clk.Step(10*time.Minute + time.Second)
	if d := b.Next("a"); d != 10*time.Second {
		t.Errorf("after 10 minutes without failure: %s, want 10s", d)
	}
	clk.Step(11 * time.Minute)
	b.GC()
	if d := b.Current("b"); d != 0 {
		t.Errorf("GC kept a key idle for 21 minutes (delay %s)", d)
	}
}

// TestBackoffPeekAndCurrent: the durations the container machine reads are
// pure. Current is the wait before a restart (0 before the first failure,
// kubelet's immediate first restart), Peek the next pull backoff; neither
// records a failure, and both forget a key idle for 10 minutes.
func TestBackoffPeekAndCurrent(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	b := NewBackoff(clk, 10*time.Second, 300*time.Second, 10*time.Minute)
	for _, step := range []struct {
		next          bool          // record a failure first
		wait          time.Duration // then let this much time pass
		current, peek time.Duration
	}{
		{false, 0, 0, 10 * time.Second},
		{false, 0, 0, 10 * time.Second}, // asking twice changes nothing
		{true, 0, 10 * time.Second, 20 * time.Second},
		{true, time.Second, 20 * time.Second, 40 * time.Second},
		{true, 0, 40 * time.Second, 80 * time.Second},
		{true, 0, 80 * time.Second, 160 * time.Second},
		{true, 0, 160 * time.Second, 300 * time.Second},
		{true, 0, 300 * time.Second, 300 * time.Second},
		{false, 10*time.Minute + time.Second, 0, 10 * time.Second},
	} {
		if step.next {
			b.Next("k")
		}
		clk.Step(step.wait)
		if c, p := b.Current("k"), b.Peek("k"); c != step.current || p != step.peek {
			t.Errorf("current %s, peek %s; want %s, %s", c, p, step.current, step.peek)
		}
	}
}
