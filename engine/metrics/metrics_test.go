package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/speclet/speclet/fsm"
)

// TestSeriesFromTheSpec: every row of the spec is a transition series from
// the start, at 0, a step counts on its own series only; the machines per
// state are what Machines says at the scrape (every state of the spec
// listed, at 0 when none is in it), and kubelet's running pods and
// containers are read from the same counts.
func TestSeriesFromTheSpec(t *testing.T) {
	reg := prometheus.NewRegistry()
	var machines [][2]string
	m, err := New(reg, func(add func(machine, state string)) {
		for _, ms := range machines {
			add(ms[0], ms[1])
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "speclet_transitions_total"); err != nil || n != len(TransitionLabels()) {
		t.Fatalf("speclet_transitions_total has %d series (%v), want the spec's %d", n, err, len(TransitionLabels()))
	}
	row := TransitionLabels()[0]
	m.Transition(row[0], row[1], row[2], row[3])
	if v := testutil.ToFloat64(m.transitions.WithLabelValues(row[0], row[1], row[2], row[3])); v != 1 {
		t.Errorf("%v counted %v, want 1", row, v)
	}
	machines = [][2]string{{fsm.SandboxMachineName, "ready"}, {fsm.SandboxMachineName, "ready"},
		{fsm.ContainerMachineName, "running"}, {fsm.ContainerMachineName, "stopping"}, {fsm.ContainerMachineName, "terminated"}}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			key := f.GetName()
			for _, l := range s.GetLabel() {
				key += " " + l.GetValue()
			}
			got[key] = s.GetGauge().GetValue()
		}
	}
	for key, want := range map[string]float64{
		"speclet_machines sandbox ready":     2,
		"speclet_machines container running": 1,
		"speclet_machines pod pending":       0,
		"speclet_running_pods":               2,
		"speclet_running_containers running": 2, // running and stopping
		"speclet_running_containers exited":  1,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (listed %t), want %v", key, v, ok, want)
		}
	}
	if _, ok := got["speclet_machines "+fsm.NodeMachineName+" idle"]; !ok {
		t.Error("the node machine's states are not listed")
	}
}

// TestNilRecordsNothing: an engine without a registry has nil metrics, and
// every recording method is a no-op on them.
func TestNilRecordsNothing(t *testing.T) {
	m, err := New(nil, nil)
	if err != nil || m != nil {
		t.Fatalf("New(nil) = %v, %v; want nil, nil", m, err)
	}
	m.Transition("pod", "a", "b", "e")
	m.Rejected("pod", "a", "e")
	m.StateDuration("pod", "a", time.Second)
	m.SetWorkers(1)
	m.PodStarted(time.Second, 0)
	m.WorkerDuration("sync", time.Second)
	m.Relisted(time.Second, time.Second)
	m.ContainerStarted(errors.New("x"))
	m.ImagePulled(time.Second)
	if err := m.RegisterHealth(prometheus.NewRegistry(), nil, nil); err != nil {
		t.Error(err)
	}
}

// TestHealthGauges: speclet_engine_recovered and speclet_engine_healthy say
// what the functions they read say, at each scrape.
func TestHealthGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, func(func(string, string)) {})
	if err != nil {
		t.Fatal(err)
	}
	recovered, healthy := false, errors.New("PLEG is not healthy")
	if err := m.RegisterHealth(reg, func() bool { return recovered }, func() error { return healthy }); err != nil {
		t.Fatal(err)
	}
	value := func(name string) float64 {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == name {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("no %s", name)
		return 0
	}
	if value("speclet_engine_recovered") != 0 || value("speclet_engine_healthy") != 0 {
		t.Error("gauges at 1 before recovery and while unhealthy")
	}
	recovered, healthy = true, nil
	if value("speclet_engine_recovered") != 1 || value("speclet_engine_healthy") != 1 {
		t.Error("gauges at 0 once recovered and healthy")
	}
}
