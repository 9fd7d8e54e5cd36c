package reclaim

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/internal/suite"
	"github.com/speclet/speclet/engine/metrics"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/fsm"
)

// actionless is a node machine whose steps run no action (they would call
// the runtime).
type actionless struct{ *fsm.NodeMachine }

func (m actionless) Fire(ev fsm.NodeEvent) (fsm.NodeStep, error) {
	st, err := m.NodeMachine.Fire(ev)
	st.Actions = nil
	return st, err
}

// TestNodeMachineInTheLoop: the node machine, which has no pod worker, goes
// through the one fire loop with the node kind's observers: its steps reach
// its history, the transition and state-duration metrics and its published
// state; a refused event is counted and leaves no record.
func TestNodeMachineInTheLoop(t *testing.T) {
	reg := prometheus.NewRegistry()
	var n *Machine
	mt, err := metrics.New(reg, func(add func(machine, state string)) { add(fsm.NodeMachineName, n.StateName()) })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	clk := clocktesting.NewFakeClock(time.Now())
	n = NewMachine(Config{Clock: clk, Log: log}, clk, &observe.Sinks{Metrics: mt})
	ctx := context.Background()
	m := actionless{n.machine}
	fire.Fire(ctx, m, &n.steps, fsm.NodeEventImageGcDue) // idle -> measuring
	if got := n.StateName(); got != "measuring" {
		t.Errorf("published state %q after image_gc_due, want measuring", got)
	}
	fire.Fire(ctx, m, &n.steps, fsm.NodeEventImageGcDue) // refused in measuring
	fire.Fire(ctx, m, &n.steps, fsm.NodeEventBelowHigh)  // measuring -> idle

	var got []string
	for _, tr := range n.History() {
		got = append(got, tr.Machine+" "+tr.From+" -"+tr.Event+"-> "+tr.To)
	}
	want := []string{"node idle -image_gc_due-> measuring", "node measuring -below_high-> idle"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("node history %q, want %q", got, want)
	}
	if v := suite.Scraped(t, reg, "speclet_transitions_total", "machine", "node", "from", "idle", "to", "measuring", "event", "image_gc_due"); v != 1 {
		t.Errorf("speclet_transitions_total{node idle -image_gc_due-> measuring} = %v, want 1", v)
	}
	if v := suite.Scraped(t, reg, "speclet_rejected_events_total", "machine", "node", "state", "measuring", "event", "image_gc_due"); v != 1 {
		t.Errorf("speclet_rejected_events_total{node measuring image_gc_due} = %v, want 1", v)
	}
	if c, err := testutil.GatherAndCount(reg, "speclet_state_duration_seconds"); err != nil || c < 2 {
		t.Errorf("speclet_state_duration_seconds has %d series, want the node's idle and measuring", c)
	}
	if got := n.StateName(); got != "idle" {
		t.Errorf("published state %q, want idle", got)
	}
}
