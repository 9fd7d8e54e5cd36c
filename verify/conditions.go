package verify

import (
	"fmt"
	"slices"

	"github.com/speclet/speclet/spec"
	"github.com/speclet/speclet/spec/podphase"
)

// The conditions users see (spec/system.hcl's conditions block,
// podphase.ConditionsOf) read the phase's facts, so they are evaluated in
// the phase check's fixpoint (phase.go): at every resting state, under
// every context (restart policy, last exits) and published phase that
// reach it.

// condMap is the conditions block compiled.
type condMap struct {
	serving   []bool // by state of the replicated machine
	showsExit []bool // by state of the replicated machine
	probe     int    // the machine of probe_ready
	probeRdy  []bool // by state of probe
	sandbox   int    // the machine of sandbox_ready
	sbReady   []bool // by state of sandbox
}

func (md *model) compileConditions(cm *spec.CondMap, states func([]spec.MRef) (int, []bool)) error {
	if md.phase == nil {
		return fmt.Errorf("the conditions block needs a phase block")
	}
	n := len(md.machines[md.rep].states)
	c := &condMap{serving: make([]bool, n), showsExit: make([]bool, n)}
	if _, b := states(cm.Serving); b != nil {
		c.serving = b
	}
	if _, b := states(cm.ShowsExit); b != nil {
		c.showsExit = b
	}
	c.probe, c.probeRdy = states(cm.ProbeReady)
	c.sandbox, c.sbReady = states(cm.SandboxReady)
	if c.probe < 0 || c.sandbox < 0 {
		return fmt.Errorf("the conditions block names no state of the probe or sandbox machine")
	}
	md.conds = c
	return nil
}

// compileConditionInv compiles a condition_never_true invariant.
func (md *model) compileConditionInv(iv *inv, states func([]spec.MRef) (int, []bool)) error {
	if md.conds == nil {
		return fmt.Errorf("invariant %q is about a condition, but the spec has no conditions block", iv.Name)
	}
	iv.machine = md.rep
	iv.cond = slices.Index(spec.ConditionNames, iv.ConditionNeverTrue.Name)
	iv.whileMachine, iv.while = states(iv.While)
	iv.phases = make([]bool, len(podphase.Phases))
	for _, r := range iv.Phases {
		iv.phases[slices.Index(spec.PhaseNames, r.Name)] = true
	}
	if len(iv.Phases) == 0 {
		for i := range iv.phases {
			iv.phases[i] = true
		}
	}
	return nil
}

// condTrue returns the conditions True (bit i: podphase.CondNames[i]) at
// resting state j under ctx when the status shows phase b: ConditionsOf
// over the facts the phase and conditions blocks read.
func (pc *phaseCheck) condTrue(j int32, ctx, b int) uint8 {
	i := (int(pc.restIx[j])*pc.nCtx+ctx)*4 + b
	if v := pc.conds[i]; v > 0 {
		return v - 1
	}
	r := pc.r
	ph, cm := r.md.phase, r.md.conds
	s := r.decode(r.key(int(j)))
	pst := s.st[r.singleInst[ph.pod]]
	p := podphase.Pod{
		Policy: ph.policy[pc.pol(ctx)], Terminating: ph.terminating[pst], Terminated: ph.terminated[pst],
		SandboxReady: cm.sbReady[s.st[r.singleInst[cm.sandbox]]],
	}
	probeReady := cm.probeRdy[s.st[r.singleInst[cm.probe]]]
	for c, inst := range r.repInsts {
		st := s.st[inst]
		f := podphase.Container{Kind: []podphase.Kind{podphase.Init, podphase.Sidecar, podphase.Regular}[s.roles[c]], Name: fmt.Sprint(c)}
		switch {
		case ph.running[st]:
			f.State = podphase.Runs
		case pc.exit(ctx, c) > 0:
			f.State = podphase.Exited
			f.Failed = pc.exit(ctx, c) == 2
		}
		f.Ran = f.State != podphase.NotStarted
		f.Shown = f.State == podphase.Runs || f.State == podphase.Exited && cm.showsExit[st]
		if f.Kind == podphase.Init {
			f.Ready = f.State == podphase.Exited && !f.Failed && f.Shown
		} else {
			f.Ready = podphase.ContainerReady(f.Kind, cm.serving[st] && probeReady, p.Terminating)
		}
		p.Containers = append(p.Containers, f)
	}
	cs := podphase.ConditionsOf(p, podphase.Phases[b])
	var v uint8
	for k := range podphase.CondNames {
		if cs.Get(k).True {
			v |= 1 << k
		}
	}
	pc.conds[i] = v + 1
	return v
}

// checkCondition checks a condition_never_true invariant at resting state
// to under ctx, the status showing phase b; it returns a violation's detail,
// or "".
func (pc *phaseCheck) checkCondition(iv *inv, to int32, ctx, b int) string {
	if !iv.phases[b] {
		return ""
	}
	r := pc.r
	if iv.whileMachine >= 0 && !iv.while[r.stateOf(r.key(int(to)), r.singleInst[iv.whileMachine])] {
		return ""
	}
	iv.checks++
	if pc.condTrue(to, ctx, b)&(1<<iv.cond) == 0 {
		return ""
	}
	return fmt.Sprintf("the condition %s users see is True, the phase %s", podphase.CondNames[iv.cond], podphase.Phases[b])
}
