package devicemanager

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/speclet/speclet/engine/internal/suite"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/fsm"
)

// TestMain records the row coverage of the device plugin machine for the
// check of every engine test (engine/internal/suite, engine/doc.go #
// Tests).
func TestMain(m *testing.M) { suite.Main(m, "engine/devicemanager") }

// pluginState is the state of resource's machine, "" for none.
func (m *Manager) pluginState(resource string) string {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	if p := m.plugins[resource]; p != nil {
		return p.machine.State().String()
	}
	return ""
}

// stepLog keeps the steps of the machines, as "from -event-> to".
type stepLog struct {
	mu    sync.Mutex
	steps []string
}

func (l *stepLog) tell(s observe.Step) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, fmt.Sprintf("%s -%s-> %s", s.From, s.Event, s.To))
}

func (l *stepLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.steps, "\n")
}

// TestMachineRows drives one resource's machine through every row of
// spec/device_plugin.hcl with a real plugin over gRPC: registrations
// before its first list and again while it runs (the replaced endpoint's
// stream end is dropped), lists with and without a healthy device, its
// death in each connected state, the grace period on the manager's clock
// (found by Capacity) and a registration after it; each step is the one
// the spec gives, and capacity and allocatable follow.
func TestMachineRows(t *testing.T) {
	dir := t.TempDir()
	var clockMu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	steps := &stepLog{}
	m, changed := startManagerWith(t, Config{Dir: dir, Now: clock, Sinks: &observe.Sinks{Steps: steps.tell}})
	p := newFakePlugin(t, dir, res, "dp.sock")
	unhealthy := []*pluginapi.Device{{ID: "d1", Health: pluginapi.Unhealthy}, {ID: "d2", Health: pluginapi.Unhealthy}}
	setDevs := func(devs []*pluginapi.Device) { p.mu.Lock(); p.devs = devs; p.mu.Unlock() }
	hold := func() chan struct{} {
		g := make(chan struct{})
		p.mu.Lock()
		p.listGate = g
		p.mu.Unlock()
		return g
	}
	register := func() {
		t.Helper()
		if err := p.register(m); err != nil {
			t.Fatalf("register: %v", err)
		}
	}
	in := func(state string, capacity, allocatable int64) {
		t.Helper()
		waitFor(t, changed, state, func() bool { m.Capacity(); return m.pluginState(res) == state }) // Capacity finds the grace timer
		waitFor(t, changed, fmt.Sprintf("%s: capacity %d, allocatable %d", state, capacity, allocatable), func() bool {
			c, a := counts(m, res)
			return c == capacity && a == allocatable
		})
	}
	if got := m.pluginState(res); got != "" {
		t.Fatalf("before any registration: a machine in %q", got)
	}

	gate := hold()
	setDevs(unhealthy)
	register()
	in("registered", 0, 0)
	register() // before the first list: the first endpoint's stream end is not the resource's
	in("registered", 0, 0)
	close(gate)
	in("unhealthy", 2, 0)
	p.updates <- unhealthy
	waitFor(t, changed, "the second list", func() bool { return strings.Count(steps.String(), "-devices->") == 2 })
	p.updates <- healthy("d1", "d2")
	in("healthy", 2, 2)
	p.updates <- healthy("d1", "d2", "d3")
	in("healthy", 3, 3)
	p.updates <- unhealthy
	in("unhealthy", 2, 0)
	p.mu.Lock()
	p.listGate = nil
	p.mu.Unlock()
	setDevs(healthy("d1"))
	register() // while unhealthy
	in("healthy", 1, 1)
	gate = hold()
	register() // while healthy; the plugin dies before its first list
	in("registered", 1, 1)
	p.stop()
	in("gone", 1, 0)
	close(gate)

	clockMu.Lock()
	now = now.Add(EndpointGracePeriod)
	clockMu.Unlock()
	in("gone", 1, 0) // not past the grace yet
	clockMu.Lock()
	now = now.Add(time.Second)
	clockMu.Unlock()
	in("removed", 0, 0)
	if c, _ := m.Capacity(); len(c) != 1 {
		t.Errorf("removed: capacity %v, want the resource at 0", c)
	}

	p.mu.Lock()
	p.listGate = nil
	p.mu.Unlock()
	p.start()
	register() // after the grace
	in("healthy", 1, 1)
	p.stop()
	in("gone", 1, 0)
	p.start()
	register() // within the grace
	in("healthy", 1, 1)
	p.updates <- unhealthy
	in("unhealthy", 2, 0)
	p.stop()
	in("gone", 2, 0)

	want := strings.Join([]string{
		"absent -registered-> registered",
		"registered -registered-> registered",
		"registered -devices-> unhealthy",
		"unhealthy -devices-> unhealthy",
		"unhealthy -devices-> healthy",
		"healthy -devices-> healthy",
		"healthy -devices-> unhealthy",
		"unhealthy -registered-> registered",
		"registered -devices-> healthy",
		"healthy -registered-> registered",
		"registered -stream_ended-> gone",
		"gone -grace_over-> removed",
		"removed -registered-> registered",
		"registered -devices-> healthy",
		"healthy -stream_ended-> gone",
		"gone -registered-> registered",
		"registered -devices-> healthy",
		"healthy -devices-> unhealthy",
		"unhealthy -stream_ended-> gone",
	}, "\n")
	if got := steps.String(); got != want {
		t.Errorf("steps:\n%s\nwant:\n%s", got, want)
	}
	taken := map[int]bool{}
	for _, l := range strings.Split(want, "\n") {
		for i, r := range fsm.DevicePluginTransitionTable {
			if l == fmt.Sprintf("%s -%s-> %s", r.From, r.Event, r.To) {
				taken[i] = true
			}
		}
	}
	if len(taken) != len(fsm.DevicePluginTransitionTable) {
		t.Errorf("the steps take %d of the %d rows of spec/device_plugin.hcl", len(taken), len(fsm.DevicePluginTransitionTable))
	}
}

// TestRestoredGone: after a restart, a resource of the checkpoint is in
// gone with its capacity (0 devices) until its grace ends, counted from the
// start.
func TestRestoredGone(t *testing.T) {
	dir := t.TempDir()
	m, changed := startManager(t, dir)
	p := newFakePlugin(t, dir, res, "dp.sock", healthy("d1")...)
	if err := p.register(m); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changed, "1 device", func() bool { _, a := counts(m, res); return a == 1 })
	m.Stop()
	p.stop()

	var clockMu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	m2, _ := startManagerWith(t, Config{Dir: dir, Now: clock})
	if got := m2.pluginState(res); got != "gone" {
		t.Fatalf("after a restart: %q, want gone", got)
	}
	if c, _ := m2.Capacity(); len(c) != 1 {
		t.Errorf("within the grace: capacity %v, want the resource", c)
	}
	clockMu.Lock()
	now = now.Add(EndpointGracePeriod + time.Second)
	clockMu.Unlock()
	if c, a := counts(m2, res); c != 0 || a != 0 || m2.pluginState(res) != "removed" {
		t.Errorf("past the grace: capacity %d allocatable %d in %s, want 0 0 in removed", c, a, m2.pluginState(res))
	}
}

// TestObserve: after Observe, the machines' steps go to the sinks it gave
// (the engine's metrics and Config.Steps), no longer to Config.Sinks.
func TestObserve(t *testing.T) {
	dir := t.TempDir()
	before, after := &stepLog{}, &stepLog{}
	m, changed := startManagerWith(t, Config{Dir: dir, Sinks: &observe.Sinks{Steps: before.tell}})
	p := newFakePlugin(t, dir, res, "dp.sock", healthy("d1")...)
	if err := p.register(m); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changed, "1 device", func() bool { _, a := counts(m, res); return a == 1 })
	m.Observe(&observe.Sinks{Steps: after.tell})
	p.stop()
	waitFor(t, changed, "the plugin gone", func() bool { _, a := counts(m, res); return a == 0 })
	if got, want := before.String(), "absent -registered-> registered\nregistered -devices-> healthy"; got != want {
		t.Errorf("steps before Observe:\n%s\nwant:\n%s", got, want)
	}
	if got, want := after.String(), "healthy -stream_ended-> gone"; got != want {
		t.Errorf("steps after Observe:\n%s\nwant:\n%s", got, want)
	}
	var none *Manager
	none.Observe(nil) // a node without a manager
}
