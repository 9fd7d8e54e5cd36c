package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/reclaim"
	"github.com/speclet/speclet/engine/worker"
	"github.com/speclet/speclet/fsm"
	"github.com/speclet/speclet/spec"
)

// This file is the actions' counterpart of TestGuardsMatchTies: every
// engine test that drives machines checks each action run against the
// `effect` block spec/system.hcl declares for it, which `speclet spec
// verify` trusts. An observer of every machine kind (registerEffects, for
// the tests only) follows each action through the fire loop (engine/fire,
// Observer.Scope) and checks when it returned that:
//
//   - it raised to its own machine exactly one of the effect's reports
//     (nothing when they are empty), or nothing when the effect says
//     may_report_nothing (then it delivered nothing either: it failed
//     before any effect) or its requires did not hold when it began;
//     nothing when the action has no effect; and, when the effect may
//     report nothing, nothing when the action failed (returned an error);
//   - each event it delivered to another machine (that machine's fire,
//     from the action or a goroutine it waited for) is one of its sends, in
//     the declared order (an event may repeat: it goes to every container);
//     nothing when it has no effect;
//   - an event a machine's observers deliver (the probe machine learns of
//     its container's states) is declared `external`: the model lets it
//     happen at any time.
//
// A harness test fails on what its engines did (scriptHarness.stop);
// TestMain fails on what other tests' engines did and, when the whole
// package ran, prints how many runs of each action were checked.

// effects is the check every engine test feeds.
var effects = newEffectChecker()

// registerEffects registers the check's observer on every machine kind:
// a pod's (worker.AddCheck) and the node's (reclaim.AddCheck). TestMain
// calls it unless benchmarks run (they measure the engine's own
// observers).
func registerEffects() {
	c := observe.Check{
		Scope: func(ctx context.Context, st observe.CheckStep, i int) context.Context {
			return effectScope(ctx, st.Owner, st.Step, st.Machine, st.Event, st.Actions, st.Queued, st.LastErr, i)
		},
		Ran: func(_ context.Context, st observe.CheckStep) { effects.ran(st.Owner, st.Step, st.Queued, st.LastErr) },
		Refused: func(ctx context.Context, st observe.CheckStep) {
			effects.refused(ctx, st.Owner, st.Machine, st.Event, st.Queued)
		},
	}
	worker.AddCheck(c)
	reclaim.AddCheck(c)
}

// effectScope is the context the observers of step st of o's machine run
// under (i < 0), or its action i: the check follows each from there.
// queued is o's queue of raised events, lastErr the error of the last
// action that ran.
func effectScope(ctx context.Context, o owner, st any, machine, event string, actions, queued []string, lastErr string, i int) context.Context {
	if i < 0 {
		effects.step(ctx, o, st, machine, event, queued)
		return context.WithValue(ctx, effectScopeKey{}, hooksScope{machine: machine})
	}
	run := effects.begin(o, st, machine, actions[i], queued, lastErr)
	return context.WithValue(ctx, effectScopeKey{}, run)
}

// lastError is the error of the last action that ran, "" for none.
func lastError(rs []ActionResult) string {
	if len(rs) == 0 {
		return ""
	}
	return rs[len(rs)-1].Error
}

// owner is the owner of a machine the check follows: a pod's
// (worker.Owner) or the node's (*reclaim.Machine).
type owner = observe.Owner

// engineOf is what identifies o's engine to the check, which keeps
// violations per engine (take): the host of a pod's worker, the node
// machine itself.
func engineOf(o owner) any {
	switch x := o.(type) {
	case worker.Owner:
		return x.Host()
	case *reclaim.Machine:
		return x
	}
	panic(fmt.Sprintf("effects: an owner of type %T", o))
}

// effectScopeKey keys the scope a context runs under: an *actionRun while
// an action runs, a hooksScope while the observers of a step run.
type effectScopeKey struct{}

// hooksScope: the observers of a step of machine run.
type hooksScope struct{ machine string }

// actionRun is one run of an action: what it raised and delivered.
type actionRun struct {
	owner           owner
	machine, action string
	base            int  // the length of the owner's queue when the action began
	unmet           bool // the effect's requires did not hold when it began
	sent            []string
	closed          bool
}

// effectFrame is a step of one machine whose hooks or actions run (steps
// nest when an action's delivery comes back to its own machine).
type effectFrame struct {
	st  any // the *step
	run *actionRun
}

// effectOwner is what the check knows of one machine instance.
type effectOwner struct {
	pending []string      // the events queued behind the last step that ended
	frames  []effectFrame // the steps under way, innermost last
}

type effectChecker struct {
	effects   map[string]*spec.Effect // by "machine.action"
	externals map[string]bool         // "machine.event"

	mu         sync.Mutex
	owners     map[owner]*effectOwner
	runs       map[string]int   // "machine.action" -> runs checked
	outcomes   map[string]int   // "machine.action -> event" (or "nothing") -> runs
	sent       map[string]int   // "machine.action -> machine.event" -> deliveries
	observed   map[string]int   // "machine.event" an observer delivered -> times
	violations map[any][]string // by engine (engineOf)
}

func newEffectChecker() *effectChecker {
	s, diags := spec.Parse(spec.Embedded())
	if diags.HasErrors() {
		panic(diags.Error())
	}
	c := &effectChecker{effects: map[string]*spec.Effect{}, externals: map[string]bool{}, owners: map[owner]*effectOwner{},
		runs: map[string]int{}, outcomes: map[string]int{}, sent: map[string]int{}, observed: map[string]int{}, violations: map[any][]string{}}
	for _, e := range s.System.Effects {
		c.effects[e.Machine.Name+"."+e.Action.Name] = e
	}
	for _, x := range s.System.Externals {
		c.externals[x.Machine.Name+"."+x.Event.Name] = true
	}
	return c
}

// violate records a violation of o's engine. c.mu is held.
func (c *effectChecker) violate(o owner, format string, args ...any) {
	e := engineOf(o)
	msg := fmt.Sprintf(format, args...)
	if attrs := o.LogAttrs(); len(attrs) > 0 {
		msg += fmt.Sprintf(" %v", attrs)
	}
	c.violations[e] = append(c.violations[e], msg)
}

func (c *effectChecker) owner(o owner) *effectOwner {
	eo := c.owners[o]
	if eo == nil {
		eo = &effectOwner{}
		c.owners[o] = eo
	}
	return eo
}

// step: st of machine took event ev; queue is what is left of the owner's
// queue (fire took ev off it when ev came from there).
func (c *effectChecker) step(ctx context.Context, o owner, st any, machine, ev string, queue []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.arrived(ctx, o, machine, ev, queue)
	eo := c.owner(o)
	eo.frames = append(eo.frames, effectFrame{st: st})
}

// refused: the machine had no row for ev.
func (c *effectChecker) refused(ctx context.Context, o owner, machine, ev string, queue []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.arrived(ctx, o, machine, ev, queue)
	if eo := c.owner(o); len(eo.frames) == 0 {
		eo.pending = queue
		c.forget(o, eo)
	}
}

// arrived tells an event its machine's own queue held (raised by an
// earlier action) from one delivered to it, and attributes the latter to
// the scope it came from. c.mu is held.
func (c *effectChecker) arrived(ctx context.Context, o owner, machine, ev string, queue []string) {
	eo := c.owner(o)
	if n := len(eo.frames); n > 0 {
		// Delivered while a step of this machine is under way.
		if len(queue) > 0 {
			c.violate(o, "%s.%s delivered while %v were queued on the machine: they are taken before it", machine, ev, queue)
		}
		if run := eo.frames[n-1].run; run != nil {
			run.base = 0 // this delivery's steps take the whole queue
		}
	} else if len(eo.pending) > 0 {
		if eo.pending[0] != ev {
			c.violate(o, "%s took %s where its queue held %v", machine, ev, eo.pending)
		}
		eo.pending = eo.pending[1:]
		return
	}
	switch sc := ctx.Value(effectScopeKey{}).(type) {
	case *actionRun:
		if sc.owner == o {
			c.violate(o, "%s.%s fires its own machine with %s (it must raise it)", sc.machine, sc.action, ev)
			return
		}
		if sc.closed {
			c.violate(o, "%s.%s delivered %s.%s after it returned", sc.machine, sc.action, machine, ev)
			return
		}
		sc.sent = append(sc.sent, machine+"."+ev)
	case hooksScope:
		c.observed[machine+"."+ev]++
		if !c.externals[machine+"."+ev] {
			c.violate(o, "the observers of a %s step deliver %s.%s, which system.hcl does not declare external", sc.machine, machine, ev)
		}
	}
}

// begin: action of st starts; it ends the step's previous action, which
// returned prevErr.
func (c *effectChecker) begin(o owner, st any, machine, action string, queue []string, prevErr string) *actionRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	eo := c.owner(o)
	f := &eo.frames[len(eo.frames)-1]
	if f.st != st {
		panic("effects: an action begins outside its step")
	}
	if f.run != nil {
		c.end(f.run, queue, prevErr)
	}
	f.run = &actionRun{owner: o, machine: machine, action: action, base: len(queue)}
	if e := c.effects[machine+"."+action]; e != nil && len(e.Requires) > 0 {
		f.run.unmet = !c.holds(o, e.Requires)
	}
	return f.run
}

// ran: the actions of st returned, the last with lastErr.
func (c *effectChecker) ran(o owner, st any, queue []string, lastErr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	eo := c.owner(o)
	n := len(eo.frames)
	if n == 0 || eo.frames[n-1].st != st {
		panic("effects: a step ends that did not begin")
	}
	if run := eo.frames[n-1].run; run != nil {
		c.end(run, queue, lastErr)
	}
	eo.frames = eo.frames[:n-1]
	eo.pending = queue
	c.forget(o, eo)
}

// forget drops what the check knows of o when it is nothing (no step under
// way, no event queued): the check keeps no machine alive. c.mu is held.
func (c *effectChecker) forget(o owner, eo *effectOwner) {
	if len(eo.frames) == 0 && len(eo.pending) == 0 {
		delete(c.owners, o)
	}
}

// holds reports whether the once-per-pod machine of each of states is in
// one of them, for o's pod.
func (c *effectChecker) holds(o owner, states []spec.MRef) bool {
	p, ok := o.(worker.Owner)
	for _, s := range states {
		var cur string
		switch {
		case ok && s.Machine == fsm.PodMachineName:
			pod, _ := p.PodMachines()
			cur = pod.String()
		case ok && s.Machine == fsm.SandboxMachineName:
			_, sb := p.PodMachines()
			cur = sb.String()
		default:
			panic(fmt.Sprintf("effects: requires %s: the check reads the pod and sandbox machines only", s))
		}
		if cur == s.Name {
			return true
		}
	}
	return false
}

// end checks run once it returned err ("" for none); queue is its owner's
// queue then.
func (c *effectChecker) end(run *actionRun, queue []string, err string) {
	run.closed = true
	name := run.machine + "." + run.action
	raised := queue[min(run.base, len(queue)):]
	c.runs[name]++
	outcome := "nothing"
	if len(raised) > 0 {
		outcome = strings.Join(raised, ",")
	}
	c.outcomes[name+" -> "+outcome]++
	for _, s := range run.sent {
		c.sent[name+" -> "+s]++
	}
	for _, v := range checkEffect(c.effects[name], run.unmet, err != "", raised, run.sent) {
		c.violate(run.owner, "%s: %s", name, v)
	}
}
