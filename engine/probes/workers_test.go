package probes

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/speclet/speclet/engine/handlers"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/prober"
	"github.com/speclet/speclet/fsm"
)

// fakeContainer is a container as the tests set it up, on a clock they
// move; it records what the Workers tell it.
type fakeContainer struct {
	spec    *v1.Container
	now     time.Time
	started time.Time
	jitter  time.Duration
	after   chan time.Time // what After returns (nil: never)
	state   fsm.ProbeState
	posted  chan Report
	raised  []fsm.ProbeEvent
	killed  []string // "kind grace"
	events  []string // "reason: message"
	probed  []string // "kind success" of each result counted
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newFake(spec *v1.Container) *fakeContainer {
	return &fakeContainer{spec: spec, now: t0, started: t0, state: fsm.ProbeInitialState, posted: make(chan Report, 8)}
}

// workers are Workers bound to c.
func (c *fakeContainer) workers() *Workers {
	w := &Workers{}
	w.Bind(c)
	return w
}

func (c *fakeContainer) PodUID() types.UID   { return "u" }
func (c *fakeContainer) Name() string        { return c.spec.Name }
func (c *fakeContainer) Spec() *v1.Container { return c.spec }
func (c *fakeContainer) Target() handlers.Target {
	return handlers.Target{Name: c.spec.Name, PodIP: "127.0.0.1", Spec: c.spec}
}
func (c *fakeContainer) StartedAt() time.Time                 { return c.started }
func (c *fakeContainer) Now() time.Time                       { return c.now }
func (c *fakeContainer) Jitter(time.Duration) time.Duration   { return c.jitter }
func (c *fakeContainer) After(time.Duration) <-chan time.Time { return c.after }
func (c *fakeContainer) Context() context.Context             { return context.Background() }
func (c *fakeContainer) Post(r Report)                        { c.posted <- r }
func (c *fakeContainer) State() fsm.ProbeState                { return c.state }
func (c *fakeContainer) Raise(ev fsm.ProbeEvent)              { c.raised = append(c.raised, ev) }
func (c *fakeContainer) Kill(_ context.Context, k prober.Kind, grace int64) {
	c.killed = append(c.killed, fmt.Sprint(k, " ", grace))
}
func (c *fakeContainer) Probed(k prober.Kind, success bool, d time.Duration) {
	c.probed = append(c.probed, fmt.Sprint(k, " ", success))
}
func (c *fakeContainer) Event(reason, message string) {
	c.events = append(c.events, reason+": "+message)
}

// tcpProbe is a tcpSocket probe of port on the loopback every 10 s.
func tcpProbe(port int, failureThreshold int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(port)}},
		PeriodSeconds: 10, TimeoutSeconds: 1, FailureThreshold: failureThreshold}
}

// failing is a port no probe can reach (out of range): its probe fails
// without dialing.
const failing = 0

// result waits for the next result a probe posts.
func (c *fakeContainer) result(t *testing.T) Report {
	t.Helper()
	select {
	case r := <-c.posted:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no probe result posted")
		return Report{}
	}
}

// TestNoProbes: a container without probes is started and ready at once,
// and no worker runs (no probe_due timer).
func TestNoProbes(t *testing.T) {
	c := newFake(&v1.Container{Name: "app"})
	w := c.workers()
	w.Add()
	run(t, w.StartStartup())
	run(t, w.StartProbes())
	if want := []fsm.ProbeEvent{fsm.ProbeEventStartupOk, fsm.ProbeEventReady}; !slices.Equal(c.raised, want) {
		t.Errorf("raised %v, want %v", c.raised, want)
	}
	if d := w.NextProbe(); d >= 0 {
		t.Errorf("next_probe %v with no worker, want negative", d)
	}
}

// TestReadinessThreshold: a failing readiness probe of a ready container
// runs on its ticks, each failure is an Unhealthy event, and only the
// failureThreshold-th failure in a row is the readiness_failed input.
func TestReadinessThreshold(t *testing.T) {
	c := newFake(&v1.Container{Name: "app", ReadinessProbe: tcpProbe(failing, 2)})
	c.jitter = 3 * time.Second
	w := c.workers()
	w.Add() // the pod's first sync: ticks at t0+3s, t0+13s, ...
	c.now = t0.Add(5 * time.Second)
	run(t, w.StartProbes())
	c.state = fsm.ProbeStateReady
	if d := w.NextProbe(); d != 8*time.Second {
		t.Fatalf("next_probe %v, want 8s (the tick at t0+13s)", d)
	}
	run(t, w.RunProbe()) // not due yet
	select {
	case r := <-c.posted:
		t.Fatalf("a probe ran before its tick: %+v", r)
	default:
	}
	for i, want := range []bool{false, true} {
		c.now = c.now.Add(w.NextProbe())
		run(t, w.RunProbe())
		r := c.result(t)
		if r.Success || r.Kind != prober.Readiness || r.UID != "u" || r.Container != "app" || r.Worker == 0 {
			t.Fatalf("probe %d: %+v, want a failed readiness result of app's worker", i, r)
		}
		in, ok := w.Result(r)
		if ok != want || ok && in != fsm.InputReadinessFailed {
			t.Errorf("failure %d: input %v %v, want %v", i+1, in, ok, want)
		}
		if d := w.NextProbe(); d != 10*time.Second {
			t.Errorf("after probe %d next_probe %v, want one period", i, d)
		}
	}
	if len(c.events) != 2 || c.events[0][:len("Unhealthy: Readiness probe failed: ")] != "Unhealthy: Readiness probe failed: " {
		t.Errorf("events %q, want two Unhealthy readiness failures", c.events)
	}
	if want := []string{"readiness false", "readiness false"}; fmt.Sprint(c.probed) != fmt.Sprint(want) {
		t.Errorf("results counted %q, want %q (each raw result, not only the thresholded change)", c.probed, want)
	}
}

// TestStoppedWorkerResult: a result of a worker stopped meanwhile counts
// for nothing, even when a new worker of the same kind runs.
func TestStoppedWorkerResult(t *testing.T) {
	c := newFake(&v1.Container{Name: "app", LivenessProbe: tcpProbe(failing, 1)})
	w := c.workers()
	run(t, w.StartProbes())
	c.now = c.now.Add(w.NextProbe())
	run(t, w.RunProbe())
	old := c.result(t)
	run(t, w.StopProbes())
	if _, ok := w.Result(old); ok {
		t.Error("a stopped worker's result was counted")
	}
	run(t, w.StartProbes())
	if _, ok := w.Result(old); ok {
		t.Error("an earlier worker's result was counted for the new one")
	}
	if len(c.events) != 0 || len(c.probed) != 0 {
		t.Errorf("events %q, results counted %q for results of stopped workers", c.events, c.probed)
	}
}

// TestKillContainer: a failed probe kills the container with its own
// grace period (the startup probe's while it runs), or the pod's; the
// liveness and startup workers stop, the readiness worker goes on.
func TestKillContainer(t *testing.T) {
	grace := int64(5)
	startup := tcpProbe(failing, 1)
	startup.TerminationGracePeriodSeconds = &grace
	for _, tc := range []struct {
		name  string
		state fsm.ProbeState
		start func(*Workers) op.Op
		want  string
	}{
		{"startup failed", fsm.ProbeStateKilling, func(w *Workers) op.Op { return w.StartStartup() }, "startup 5"},
		{"liveness failed", fsm.ProbeStateKilling, func(w *Workers) op.Op { return w.StartProbes() }, "liveness -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFake(&v1.Container{Name: "app", StartupProbe: startup, LivenessProbe: tcpProbe(failing, 1), ReadinessProbe: tcpProbe(failing, 1)})
			w := c.workers()
			run(t, tc.start(w))
			c.state = tc.state
			run(t, w.KillContainer())
			if want := []string{tc.want}; !slices.Equal(c.killed, want) {
				t.Errorf("killed %q, want %q", c.killed, want)
			}
			for k, wk := range w.workers {
				if running, want := wk != nil, tc.name == "liveness failed" && prober.Kind(k) == prober.Readiness; running != want {
					t.Errorf("%s worker running %v after the kill, want %v", prober.Kind(k), running, want)
				}
			}
			run(t, w.StopProbes())
		})
	}
}

// TestReadinessWhileStopping: once the container stops (its preStop hook
// runs) only the readiness worker probes, as kubelet's, and by itself on
// its ticks: the pod's worker runs the stop and fires no probe_due. Its
// results count (the Unhealthy event, the metrics) but route nothing, and
// StopProbes stops it when the instance no longer runs.
func TestReadinessWhileStopping(t *testing.T) {
	c := newFake(&v1.Container{Name: "app", StartupProbe: tcpProbe(failing, 3), LivenessProbe: tcpProbe(failing, 1), ReadinessProbe: tcpProbe(failing, 1)})
	c.after = make(chan time.Time)
	w := c.workers()
	w.Add()
	run(t, w.StartProbes())
	c.state = fsm.ProbeStateStopping
	run(t, w.StopLivenessAndStartup())
	if w.workers[prober.Liveness] != nil || w.workers[prober.Startup] != nil || w.workers[prober.Readiness] == nil {
		t.Fatalf("after stop_liveness_and_startup: workers %v, want readiness only", w.workers)
	}
	for i := range 2 {
		c.after <- t0 // its next tick came, with no run_probe
		r := c.result(t)
		if r.Kind != prober.Readiness || r.Success {
			t.Fatalf("probe %d while stopping: %+v, want a failed readiness result", i, r)
		}
		if in, ok := w.Result(r); ok {
			t.Errorf("a result while stopping routed %v", in)
		}
	}
	if want := []string{"readiness false", "readiness false"}; !slices.Equal(c.probed, want) || len(c.events) != 2 {
		t.Errorf("results counted %q, events %q; want %q and their Unhealthy events", c.probed, c.events, want)
	}
	run(t, w.StopProbes())
	if d := w.NextProbe(); d >= 0 {
		t.Errorf("next_probe %v once stopped, want no worker", d)
	}
}

// TestTriggerReadiness: the trigger probes at once past the initial delay
// and restarts the ticks from now; within the delay it only moves the next
// probe to the delay's end.
func TestTriggerReadiness(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	probe := tcpProbe(l.Addr().(*net.TCPAddr).Port, 1)
	probe.InitialDelaySeconds = 15
	c := newFake(&v1.Container{Name: "app", ReadinessProbe: probe})
	w := c.workers()
	w.Add()
	run(t, w.StartProbes())
	c.now = t0.Add(5 * time.Second)
	run(t, w.TriggerReadiness())
	if d := w.NextProbe(); d != 10*time.Second {
		t.Errorf("trigger within the initial delay: next_probe %v, want 10s (the delay's end)", d)
	}
	c.now = t0.Add(20 * time.Second)
	run(t, w.TriggerReadiness())
	r := c.result(t)
	if !r.Success || r.Kind != prober.Readiness {
		t.Fatalf("triggered probe %+v, want a readiness success", r)
	}
	if in, ok := w.Result(r); !ok || in != fsm.InputReadinessSucceeded {
		t.Errorf("input %v %v, want readiness_succeeded", in, ok)
	}
	if d := w.NextProbe(); d != 10*time.Second {
		t.Errorf("after the trigger next_probe %v, want one period from now", d)
	}
}

func (c *fakeContainer) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (c *fakeContainer) LogAttrs() []any      { return []any{"container", c.spec.Name} }

// run runs an action's operations, from first, as the engine does, with no
// runtime (the probe machine's actions call none); they end without error.
func run(t *testing.T, first op.Op) {
	t.Helper()
	if err := op.Exec(t.Context(), nil, first); err != nil {
		t.Fatalf("action failed: %v", err)
	}
}
