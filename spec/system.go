package spec

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// System is the coupling between machines and the invariants of the whole
// pod, declared by the top-level blocks replicated, tie, effect and invariant
// (in spec/system.hcl). It is what `speclet spec verify` explores; the
// generated code does not use it. The zero System declares nothing.
type System struct {
	// Replicated names the machine that runs once per container of the pod,
	// each instance with a role (init, sidecar or regular); every other
	// machine runs once per pod. Unset when no replicated block is given.
	Replicated Ref
	// ReplicatedRange covers the replicated block's header.
	ReplicatedRange hcl.Range
	Ties            []*Tie
	Effects         []*Effect
	Externals       []*External
	Invariants      []*Invariant
	Parameters      []*Parameter
	Flags           []*Flag
	Restored        []*Restored
	// Phase says how the phase users see reads the system; nil when no
	// phase block is given.
	Phase *PhaseMap
	// Conditions says how the pod conditions users see read the system;
	// nil when no conditions block is given.
	Conditions *CondMap
}

// PhaseMap says how the pod phase users see (package spec/podphase, the
// function the engine's status calls) reads a state of the system, declared
// by the block `phase { ... }`: a container instance of the replicated
// machine runs while in one of Running; otherwise it exited when its flag
// ExitFailed was ever recorded (the flag then says whether the exit
// failed) or when it entered one of Started since (it ran: an exit not
// recorded is unknown, a failure), else it has not started. The pod worker
// (the single machine of Terminating) terminates in one of Terminating and
// has terminated in one of Terminated. Policy names the values of the
// restart policy parameter that mean Always, OnFailure and Never, in that
// order. The phase reads the policy and every container's last exit at
// every status, which the exploration forgets between inputs: the
// verifier follows them beside the explored states (package verify).
type PhaseMap struct {
	Doc     string
	Running []MRef
	// Started: a container that enters one of these states ran; until an
	// exit is recorded its exit is unknown (a failure).
	Started     []MRef
	ExitFailed  MRef
	Terminating []MRef
	Terminated  []MRef
	Policy      []MRef
	// KeepsTerminal: the status keeps a Succeeded or Failed phase once
	// published, whatever the machines' states give later (kubelet's
	// status manager; engine/podstatus Compute).
	KeepsTerminal bool
	Range         hcl.Range
}

// PhaseNames are the phases a phase_rank invariant names (phase.NAME), in
// the order of podphase.Phases.
var PhaseNames = []string{"pending", "running", "succeeded", "failed"}

// Restored is a family of states the engine may rebuild the machines of a
// pod in after a restart (NewXMachineAt in its recovery), declared by
// `restored "NAME" { states = [M.S, ...] }`: every machine named starts in
// one of its states listed (each instance of the replicated machine
// independently), the others in their initial state. The verifier explores
// from each of them as from the initial states.
type Restored struct {
	Decl
	States []MRef
}

// Parameter is a property of the pod fixed for its life, declared by
// `parameter "NAME" { values = ["a", "b"] }` (the restart policy): every
// value is explored. Ties and invariants name a value NAME.VALUE. With
// `per_instance = true` it is a property of each instance of the replicated
// machine (a container's imagePullPolicy): every instance has its own
// value, and only the ties and invariants of the replicated machine may
// name it.
type Parameter struct {
	Decl
	Values      []Ref
	PerInstance bool
}

// Flag is a fact about one instance of Machine that an action records and a
// tie reads, declared by `flag "MACHINE" "NAME" { set_by = MACHINE.ACTION }`
// (whether the exit record_exit recorded was a failure): each run of SetBy
// records a new value, any value.
type Flag struct {
	Machine Ref
	Name    Ref
	Doc     string
	SetBy   MRef
	Range   hcl.Range
}

// External is an event the engine fires from outside the pod (another pod,
// a global decision) that no input of routes.hcl carries, declared by
// `external "MACHINE" "EVENT" {}`: it may happen whenever no input is being
// handled.
type External struct {
	Machine Ref
	Event   Ref
	Doc     string
	Range   hcl.Range
}

// Roles are the roles an instance of the replicated machine may have, in
// the order a pod spec lists them: init and sidecar containers (restartable
// init containers) come before regular ones.
var Roles = []string{"init", "sidecar", "regular"}

// MRef is a reference written MACHINE.NAME to a state or an event of a
// machine.
type MRef struct {
	Machine string
	Name    string
	Range   hcl.Range
}

func (r MRef) String() string { return r.Machine + "." + r.Name }

// Tie makes a guard of Machine a function of the other machines' states
// (and of the instance's role, the parameters and the instance's flags),
// declared by `tie "MACHINE" "GUARD" { ... }`. The conditions given (In, All,
// Any, Roles, Given, Flags) must all hold. With Mode "iff" (the default) the
// guard holds exactly when they do; with Mode "if" the guard holds when they
// do and is free otherwise; with Mode "may" the guard is free when they do
// and false otherwise. A guard may have several ties: it holds when an iff or
// if tie holds, else it is free when it has an if tie or a may tie holds,
// else it is false.
type Tie struct {
	Machine Ref
	Guard   Ref
	Doc     string
	// In: the (single) machine these states belong to is in one of them.
	In []MRef
	// All: every instance of the replicated machine (of a role in Among,
	// when given) is in one of these states; true when there is none.
	All []MRef
	// Any: some instance of the replicated machine (of a role in Among) is
	// in one of these states.
	Any   []MRef
	Among []Ref // role.NAME
	// Roles: the guard's own instance (of the replicated machine) has one of
	// these roles.
	Roles []Ref
	// Given: a parameter has one of these values (PARAMETER.VALUE, one
	// parameter per list).
	Given []MRef
	// Flags: these flags (MACHINE.FLAG) of the guard's own instance are set.
	Flags []MRef
	Mode  string // "iff", "if" or "may"
	Range hcl.Range
}

// Effect says what an action of Machine does to the machines, declared by
// `effect "MACHINE" "ACTION" { ... }`: Sends are delivered, in order, when
// the action runs (to every instance of a replicated machine), then the
// action reports exactly one of Reports to its own machine.
type Effect struct {
	Machine Ref
	Action  Ref
	Doc     string
	Sends   []MRef
	Reports []MRef
	// MayReportNothing: the action may also fail before any effect, sending
	// and reporting nothing (the machine notices through a timer).
	MayReportNothing bool
	// Requires: the action fails before any effect unless the (single)
	// machine these states belong to is in one of them (a precondition the
	// engine checks); needs MayReportNothing.
	Requires []MRef
	Range    hcl.Range
}

// Invariant kinds.
const (
	InvNeverEnter    = "never_enter"
	InvRank          = "rank"
	InvAlwaysReaches = "always_reaches"
	InvAfterReaches  = "after"
	InvAlwaysIn      = "always_in"
	InvLeaves        = "leaves"
	InvPhaseRank     = "phase_rank"
)

// Invariant is a property of the whole system, declared by
// `invariant "NAME" { ... }` with exactly one kind:
//
//   - never_enter (+ optional while, from, given, among, unless): no step
//     moves an instance into one of NeverEnter while the machine of While is
//     in one of While, directly from one of From, while a parameter has one
//     of the values Given, the instance having one of the roles Among and
//     none of the flags Unless set;
//   - rank: every step of the machine moves to a state of equal or higher
//     tier (Rank lists the tiers, lowest first, and covers every state);
//   - always_reaches: from every reachable state some sequence of inputs
//     leads to one of AlwaysReaches;
//   - after (+ reaches): once the event After was delivered by an input,
//     every run of action completions and timers alone that schedules them
//     fairly leads to one of Reaches;
//   - always_in (+ optional while): in every reachable state where the
//     machine of While is in one of While, every instance of the machine of
//     AlwaysIn is in one of AlwaysIn;
//   - leaves: an instance in one of Leaves leaves it through action
//     completions and timers alone, scheduled fairly, from every reachable
//     state (a bounded exit);
//   - phase_rank: the phase users see (the phase block), evaluated at every
//     state between inputs (where the engine publishes a status), never goes
//     down a tier of PhaseRank (phase.NAME, tiers lowest first, covering
//     every phase), and a phase of the last tier never changes (with the
//     phase block's keeps_terminal the status keeps it: the verifier then
//     reports where that rule is needed).
type Invariant struct {
	Decl
	Kind          string
	NeverEnter    []MRef
	While         []MRef
	From          []MRef
	Given         []MRef
	Among         []Ref
	Unless        []MRef
	Rank          [][]MRef
	AlwaysReaches []MRef
	After         MRef
	Reaches       []MRef
	AlwaysIn      []MRef
	Leaves        []MRef
	PhaseRank     [][]MRef
	// ConditionNeverTrue (condition.NAME) and Phases (phase.NAME): see
	// InvConditionNeverTrue.
	ConditionNeverTrue MRef
	Phases             []MRef
}

var tieSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "doc"}, {Name: "in"}, {Name: "all"}, {Name: "any"}, {Name: "among"}, {Name: "roles"}, {Name: "given"}, {Name: "flags"}, {Name: "mode"},
}}

var effectSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "sends"}, {Name: "reports"}, {Name: "may_report_nothing"}, {Name: "requires"}}}

var invariantSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "doc"}, {Name: "never_enter"}, {Name: "while"}, {Name: "from"}, {Name: "given"}, {Name: "among"}, {Name: "unless"},
	{Name: "rank"}, {Name: "always_reaches"}, {Name: "after"}, {Name: "reaches"}, {Name: "always_in"}, {Name: "leaves"},
	{Name: "phase_rank"}, {Name: "condition_never_true"}, {Name: "phases"},
}}

var phaseSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "doc"}, {Name: "running", Required: true}, {Name: "started", Required: true}, {Name: "exit_failed", Required: true},
	{Name: "terminating", Required: true}, {Name: "terminated", Required: true}, {Name: "policy", Required: true},
	{Name: "keeps_terminal"},
}}

var parameterSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "values", Required: true}, {Name: "per_instance"}}}

var restoredSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "states", Required: true}}}

var flagSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "doc"}, {Name: "set_by", Required: true}}}

func labelRef(b *hcl.Block, i int) Ref { return Ref{Name: b.Labels[i], Range: b.LabelRanges[i]} }

func (s *Spec) decodeSystemBlock(b *hcl.Block) hcl.Diagnostics {
	sys := &s.System
	var diags hcl.Diagnostics
	switch b.Type {
	case "replicated":
		c, d := b.Body.Content(docSchema)
		diags = append(diags, d...)
		_ = stringAttr(c.Attributes["doc"], &diags)
		if sys.Replicated.Set() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Duplicate replicated",
				Detail:  fmt.Sprintf("Machine %q is already the replicated machine (%s); only one machine runs once per container.", sys.Replicated.Name, sys.ReplicatedRange),
				Subject: b.DefRange.Ptr(),
			})
			return diags
		}
		sys.Replicated, sys.ReplicatedRange = labelRef(b, 0), b.DefRange
	case "tie":
		t := &Tie{Machine: labelRef(b, 0), Guard: labelRef(b, 1), Range: b.DefRange, Mode: "iff"}
		c, d := b.Body.Content(tieSchema)
		diags = append(diags, d...)
		t.Doc = stringAttr(c.Attributes["doc"], &diags)
		t.In = mrefListAttr(c.Attributes["in"], &diags)
		t.All = mrefListAttr(c.Attributes["all"], &diags)
		t.Any = mrefListAttr(c.Attributes["any"], &diags)
		if a := c.Attributes["among"]; a != nil {
			t.Among = refListAttr(a, "role", &diags)
		}
		if a := c.Attributes["roles"]; a != nil {
			t.Roles = refListAttr(a, "role", &diags)
		}
		t.Given = mrefListAttr(c.Attributes["given"], &diags)
		t.Flags = mrefListAttr(c.Attributes["flags"], &diags)
		if a := c.Attributes["mode"]; a != nil {
			t.Mode = stringAttr(a, &diags)
			if t.Mode != "iff" && t.Mode != "if" && t.Mode != "may" {
				diags = append(diags, attrErr(a, "Invalid mode",
					fmt.Sprintf("mode must be \"iff\" (the guard holds exactly when the conditions do), \"if\" (it holds when they do, and is free otherwise) or \"may\" (it is free when they do, and false otherwise), not %q.", t.Mode)))
			}
		}
		if len(t.In)+len(t.All)+len(t.Any)+len(t.Roles)+len(t.Given)+len(t.Flags) == 0 && !d.HasErrors() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Tie without condition",
				Detail:  fmt.Sprintf("tie of guard %q sets none of in, all, any, roles, given or flags; an untied guard is free, so remove the block or add a condition.", t.Guard.Name),
				Subject: b.DefRange.Ptr(),
			})
		}
		sys.Ties = append(sys.Ties, t)
	case "effect":
		e := &Effect{Machine: labelRef(b, 0), Action: labelRef(b, 1), Range: b.DefRange}
		c, d := b.Body.Content(effectSchema)
		diags = append(diags, d...)
		e.Doc = stringAttr(c.Attributes["doc"], &diags)
		e.Sends = mrefListAttr(c.Attributes["sends"], &diags)
		e.Reports = mrefListAttr(c.Attributes["reports"], &diags)
		if a := c.Attributes["may_report_nothing"]; a != nil {
			e.MayReportNothing = boolAttr(a, &diags)
		}
		if a := c.Attributes["requires"]; a != nil {
			e.Requires = mrefListAttr(a, &diags)
			if !e.MayReportNothing {
				diags = append(diags, attrErr(a, "Requires without may_report_nothing",
					fmt.Sprintf("effect %q %q requires a state, so it reports nothing when the state does not hold; set may_report_nothing = true.", e.Machine.Name, e.Action.Name)))
			}
		}
		sys.Effects = append(sys.Effects, e)
	case "external":
		x := &External{Machine: labelRef(b, 0), Event: labelRef(b, 1), Range: b.DefRange}
		c, d := b.Body.Content(docSchema)
		diags = append(diags, d...)
		x.Doc = stringAttr(c.Attributes["doc"], &diags)
		sys.Externals = append(sys.Externals, x)
	case "parameter":
		p := &Parameter{Decl: declOf(b)}
		c, d := b.Body.Content(parameterSchema)
		diags = append(diags, d...)
		p.Doc = stringAttr(c.Attributes["doc"], &diags)
		if a := c.Attributes["per_instance"]; a != nil {
			p.PerInstance = boolAttr(a, &diags)
		}
		if a := c.Attributes["values"]; a != nil {
			for _, v := range stringListAttr(a, &diags) {
				p.Values = append(p.Values, Ref{Name: v, Range: a.Expr.Range()})
			}
			if len(p.Values) == 0 && !diags.HasErrors() {
				diags = append(diags, attrErr(a, "Parameter without values", fmt.Sprintf("parameter %q lists no value; list every value the pod may have.", p.Name)))
			}
		}
		sys.Parameters = append(sys.Parameters, p)
	case "phase":
		pm := &PhaseMap{Range: b.DefRange}
		c, d := b.Body.Content(phaseSchema)
		diags = append(diags, d...)
		pm.Doc = stringAttr(c.Attributes["doc"], &diags)
		pm.Running = mrefListAttr(c.Attributes["running"], &diags)
		pm.Started = mrefListAttr(c.Attributes["started"], &diags)
		if a := c.Attributes["exit_failed"]; a != nil {
			if r, ok := mrefExpr(a.Expr); ok {
				pm.ExitFailed = r
			} else {
				diags = append(diags, attrErr(a, "Invalid reference", "exit_failed must be a reference written MACHINE.FLAG."))
			}
		}
		pm.Terminating = mrefListAttr(c.Attributes["terminating"], &diags)
		pm.Terminated = mrefListAttr(c.Attributes["terminated"], &diags)
		pm.Policy = mrefListAttr(c.Attributes["policy"], &diags)
		if a := c.Attributes["keeps_terminal"]; a != nil {
			pm.KeepsTerminal = boolAttr(a, &diags)
		}
		if sys.Phase != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Duplicate phase",
				Detail:  fmt.Sprintf("The phase block is already declared at %s.", sys.Phase.Range),
				Subject: b.DefRange.Ptr(),
			})
			return diags
		}
		sys.Phase = pm
	case "conditions":
		diags = append(diags, decodeConditions(sys, b)...)
	case "restored":
		rs := &Restored{Decl: declOf(b)}
		c, d := b.Body.Content(restoredSchema)
		diags = append(diags, d...)
		rs.Doc = stringAttr(c.Attributes["doc"], &diags)
		rs.States = mrefListAttr(c.Attributes["states"], &diags)
		sys.Restored = append(sys.Restored, rs)
	case "flag":
		f := &Flag{Machine: labelRef(b, 0), Name: labelRef(b, 1), Range: b.DefRange}
		c, d := b.Body.Content(flagSchema)
		diags = append(diags, d...)
		f.Doc = stringAttr(c.Attributes["doc"], &diags)
		if a := c.Attributes["set_by"]; a != nil {
			if r, ok := mrefExpr(a.Expr); ok {
				f.SetBy = r
			} else {
				diags = append(diags, attrErr(a, "Invalid reference", "set_by must be a reference written MACHINE.ACTION."))
			}
		}
		sys.Flags = append(sys.Flags, f)
	case "invariant":
		inv := &Invariant{Decl: declOf(b)}
		c, d := b.Body.Content(invariantSchema)
		diags = append(diags, d...)
		inv.Doc = stringAttr(c.Attributes["doc"], &diags)
		var kinds []string
		if a := c.Attributes["never_enter"]; a != nil {
			kinds = append(kinds, InvNeverEnter)
			inv.NeverEnter = mrefListAttr(a, &diags)
		}
		inv.While = mrefListAttr(c.Attributes["while"], &diags)
		inv.From = mrefListAttr(c.Attributes["from"], &diags)
		inv.Given = mrefListAttr(c.Attributes["given"], &diags)
		if a := c.Attributes["among"]; a != nil {
			inv.Among = refListAttr(a, "role", &diags)
		}
		inv.Unless = mrefListAttr(c.Attributes["unless"], &diags)
		if a := c.Attributes["always_in"]; a != nil {
			kinds = append(kinds, InvAlwaysIn)
			inv.AlwaysIn = mrefListAttr(a, &diags)
		}
		if a := c.Attributes["leaves"]; a != nil {
			kinds = append(kinds, InvLeaves)
			inv.Leaves = mrefListAttr(a, &diags)
		}
		if a := c.Attributes["rank"]; a != nil {
			kinds = append(kinds, InvRank)
			inv.Rank = rankAttr(a, &diags)
		}
		if a := c.Attributes["phase_rank"]; a != nil {
			kinds = append(kinds, InvPhaseRank)
			inv.PhaseRank = rankAttr(a, &diags)
		}
		if a := c.Attributes["always_reaches"]; a != nil {
			kinds = append(kinds, InvAlwaysReaches)
			inv.AlwaysReaches = mrefListAttr(a, &diags)
		}
		if a := c.Attributes["after"]; a != nil {
			kinds = append(kinds, InvAfterReaches)
			if r, ok := mrefExpr(a.Expr); ok {
				inv.After = r
			} else {
				diags = append(diags, attrErr(a, "Invalid reference", "after must be a reference written MACHINE.EVENT."))
			}
		}
		inv.Reaches = mrefListAttr(c.Attributes["reaches"], &diags)
		if a := c.Attributes["condition_never_true"]; a != nil {
			kinds = append(kinds, InvConditionNeverTrue)
			if r, ok := mrefExpr(a.Expr); ok {
				inv.ConditionNeverTrue = r
			} else {
				diags = append(diags, attrErr(a, "Invalid reference", "condition_never_true must be a reference written condition.NAME."))
			}
		}
		inv.Phases = mrefListAttr(c.Attributes["phases"], &diags)
		switch {
		case len(kinds) == 1:
			inv.Kind = kinds[0]
		case len(kinds) == 0:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Invariant without kind",
				Detail:  fmt.Sprintf("invariant %q sets none of never_enter, rank, phase_rank, condition_never_true, always_reaches, after, always_in or leaves; set exactly one.", inv.Name),
				Subject: b.DefRange.Ptr(),
			})
		default:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Invariant with several kinds",
				Detail:  fmt.Sprintf("invariant %q sets %s; set exactly one of never_enter, rank, phase_rank, condition_never_true, always_reaches, after, always_in or leaves (write one invariant per property).", inv.Name, strings.Join(kinds, " and ")),
				Subject: b.DefRange.Ptr(),
			})
		}
		if c.Attributes["while"] != nil && inv.Kind != InvNeverEnter && inv.Kind != InvAlwaysIn && inv.Kind != InvConditionNeverTrue && inv.Kind != "" {
			diags = append(diags, attrErr(c.Attributes["while"], "Misplaced while", "while only qualifies never_enter, always_in and condition_never_true."))
		}
		if a := c.Attributes["phases"]; a != nil && inv.Kind != InvConditionNeverTrue && inv.Kind != "" {
			diags = append(diags, attrErr(a, "Misplaced phases", "phases only qualifies condition_never_true."))
		}
		for _, q := range []string{"from", "given", "among", "unless"} {
			if a := c.Attributes[q]; a != nil && inv.Kind != InvNeverEnter && inv.Kind != "" {
				diags = append(diags, attrErr(a, "Misplaced "+q, q+" only qualifies never_enter."))
			}
		}
		if a := c.Attributes["reaches"]; a != nil && inv.Kind != InvAfterReaches && inv.Kind != "" {
			diags = append(diags, attrErr(a, "Misplaced reaches", "reaches only goes with after; for a property of every state use always_reaches."))
		}
		if inv.Kind == InvAfterReaches && c.Attributes["reaches"] == nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Missing reaches",
				Detail:  fmt.Sprintf("invariant %q sets after but not reaches = [MACHINE.STATE, ...].", inv.Name),
				Subject: b.DefRange.Ptr(),
			})
		}
		sys.Invariants = append(sys.Invariants, inv)
	}
	return diags
}

// mrefExpr decodes MACHINE.NAME.
func mrefExpr(e hcl.Expression) (MRef, bool) {
	tr, d := hcl.AbsTraversalForExpr(e)
	if d.HasErrors() || len(tr) != 2 {
		return MRef{}, false
	}
	at, ok := tr[1].(hcl.TraverseAttr)
	if !ok {
		return MRef{}, false
	}
	return MRef{Machine: tr.RootName(), Name: at.Name, Range: tr.SourceRange()}, true
}

func mrefListAttr(a *hcl.Attribute, diags *hcl.Diagnostics) []MRef {
	if a == nil {
		return nil
	}
	return mrefListExpr(a, a.Expr, diags)
}

func mrefListExpr(a *hcl.Attribute, e hcl.Expression, diags *hcl.Diagnostics) []MRef {
	exprs, d := hcl.ExprList(e)
	if d.HasErrors() {
		*diags = append(*diags, &hcl.Diagnostic{
			Severity: hcl.DiagError, Summary: "Invalid " + a.Name,
			Detail:  a.Name + " must be a list of references written [MACHINE.NAME, ...].",
			Subject: e.Range().Ptr(), Context: a.Range.Ptr(),
		})
		return nil
	}
	var out []MRef
	for _, x := range exprs {
		r, ok := mrefExpr(x)
		if !ok {
			*diags = append(*diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Invalid reference",
				Detail:  fmt.Sprintf("Each element of %s must be a reference written MACHINE.NAME, e.g. pod.terminating.", a.Name),
				Subject: x.Range().Ptr(), Context: a.Range.Ptr(),
			})
			continue
		}
		out = append(out, r)
	}
	return out
}

func rankAttr(a *hcl.Attribute, diags *hcl.Diagnostics) [][]MRef {
	tiers, d := hcl.ExprList(a.Expr)
	if d.HasErrors() {
		*diags = append(*diags, attrErr(a, "Invalid rank",
			"rank must be a list of tiers, lowest first, each a list of states: [[pod.a, pod.b], [pod.c]]."))
		return nil
	}
	var out [][]MRef
	for _, t := range tiers {
		out = append(out, mrefListExpr(a, t, diags))
	}
	return out
}

// systemValidator checks the system declarations against the machines.
type systemValidator struct {
	*validator
	s        *Spec
	machines *names
}

func (v *validator) system(s *Spec, machines *names) {
	sv := &systemValidator{validator: v, s: s, machines: machines}
	sys := &s.System
	if sys.Replicated.Set() {
		sv.machine(sys.Replicated, "replicated")
	}
	for _, t := range sys.Ties {
		sv.tie(t)
	}
	effects := map[string]*Effect{}
	for _, e := range sys.Effects {
		sv.effect(e, effects)
	}
	externals := map[string]*External{}
	for _, x := range sys.Externals {
		where := fmt.Sprintf("external %q %q", x.Machine.Name, x.Event.Name)
		m := sv.machine(x.Machine, where)
		if m == nil || !sv.ref(machineNames(m, "event"), x.Event, where) {
			continue
		}
		if prev := externals[m.Name+"."+x.Event.Name]; prev != nil {
			sv.errorf(x.Event.Range, "Duplicate external", "event %q of machine %q is already external at %s.", x.Event.Name, m.Name, prev.Range)
		}
		externals[m.Name+"."+x.Event.Name] = x
	}
	params := newNames("parameter")
	for _, p := range sys.Parameters {
		v.declare(params, p.Decl)
		if p.PerInstance && !sys.Replicated.Set() {
			sv.errorf(p.NameRange, "No replicated machine", "parameter %q is per_instance, but no machine is replicated; declare one with `replicated \"container\" {}` or drop per_instance.", p.Name)
		}
		vals := newNames("value")
		for _, val := range p.Values {
			v.declare(vals, Decl{Name: val.Name, Range: val.Range, NameRange: val.Range})
		}
	}
	flags := map[string]*Flag{}
	for _, f := range sys.Flags {
		where := fmt.Sprintf("flag %q %q", f.Machine.Name, f.Name.Name)
		m := sv.machine(f.Machine, where)
		if m == nil {
			continue
		}
		v.ident("flag", Decl{Name: f.Name.Name, NameRange: f.Name.Range})
		if prev := flags[m.Name+"."+f.Name.Name]; prev != nil {
			sv.errorf(f.Name.Range, "Duplicate flag", "flag %q of machine %q is already declared at %s.", f.Name.Name, m.Name, prev.Range)
		}
		flags[m.Name+"."+f.Name.Name] = f
		if f.SetBy.Machine != m.Name {
			sv.errorf(f.SetBy.Range, "Wrong machine", "%s set_by names %s, but it must name an action of machine %q.", where, f.SetBy, m.Name)
			continue
		}
		sv.ref(machineNames(m, "action"), Ref{Name: f.SetBy.Name, Range: f.SetBy.Range}, where+" set_by")
	}
	restored := newNames("restored family")
	for _, rs := range sys.Restored {
		v.declare(restored, rs.Decl)
		for _, r := range rs.States {
			sv.mrefs([]MRef{r}, "state", "", fmt.Sprintf("restored %q states", rs.Name))
		}
	}
	if sys.Phase != nil {
		sv.phase(sys.Phase)
	}
	if sys.Conditions != nil {
		sv.conditions(sys.Conditions)
	}
	invs := newNames("invariant")
	for _, inv := range sys.Invariants {
		v.declare(invs, inv.Decl)
		sv.invariant(inv)
	}
}

// machine resolves a machine name.
func (sv *systemValidator) machine(r Ref, where string) *Machine {
	if !sv.ref(sv.machines, r, where) {
		return nil
	}
	return sv.s.Machine(r.Name)
}

func (sv *systemValidator) replicated(name string) bool {
	return sv.s.System.Replicated.Set() && sv.s.System.Replicated.Name == name
}

// names of one kind of a machine, for reference checks with hints.
func machineNames(m *Machine, kind string) *names {
	n := newNames(kind)
	add := func(d Decl) {
		n.decl[d.Name] = d
		n.order = append(n.order, d.Name)
	}
	switch kind {
	case "state":
		for _, s := range m.States {
			add(s.Decl)
		}
	case "event":
		for _, e := range m.Events {
			add(*e)
		}
	case "guard":
		for _, g := range m.Guards {
			add(*g)
		}
	case "action":
		for _, a := range m.Actions {
			add(a.Decl)
		}
	}
	return n
}

// mrefs checks that refs name items of kind of one machine (want, when not
// empty) and returns that machine.
func (sv *systemValidator) mrefs(refs []MRef, kind, want, where string) *Machine {
	var m *Machine
	for _, r := range refs {
		if want != "" && r.Machine != want {
			sv.errorf(r.Range, "Wrong machine", "%s names %s, but it must name %s %s of machine %q.", where, r, article(kind), kind, want)
			continue
		}
		if m != nil && r.Machine != m.Name {
			sv.errorf(r.Range, "Mixed machines", "%s names %s, but the list names %ss of machine %q; one list names one machine.", where, r, kind, m.Name)
			continue
		}
		mm := sv.machine(Ref{Name: r.Machine, Range: r.Range}, where)
		if mm == nil {
			continue
		}
		m = mm
		sv.ref(machineNames(mm, kind), Ref{Name: r.Name, Range: r.Range}, fmt.Sprintf("%s (machine %q)", where, mm.Name))
	}
	return m
}

func (sv *systemValidator) roles(refs []Ref, where string) {
	n := newNames("role")
	for _, r := range Roles {
		n.decl[r] = Decl{Name: r}
		n.order = append(n.order, r)
	}
	for _, r := range refs {
		sv.ref(n, r, where)
	}
}

func (sv *systemValidator) tie(t *Tie) {
	where := fmt.Sprintf("tie %q %q", t.Machine.Name, t.Guard.Name)
	m := sv.machine(t.Machine, where)
	if m == nil {
		return
	}
	if !sv.ref(machineNames(m, "guard"), t.Guard, where) {
		return
	}
	sv.given(t.Given, where+" given", sv.replicated(m.Name))
	sv.flags(t.Flags, m, where+" flags")
	if in := sv.mrefs(t.In, "state", "", where+" in"); in != nil && sv.replicated(in.Name) {
		sv.errorf(t.In[0].Range, "Replicated machine in in",
			"in names states of %q, which runs once per container; use all or any.", in.Name)
	}
	rep := sv.s.System.Replicated.Name
	for _, l := range [][]MRef{t.All, t.Any} {
		if len(l) == 0 {
			continue
		}
		if rep == "" {
			sv.errorf(l[0].Range, "No replicated machine", "all and any range over the replicated machine; declare one with `replicated \"container\" {}`.")
			continue
		}
		sv.mrefs(l, "state", rep, where)
	}
	sv.roles(t.Among, where+" among")
	sv.roles(t.Roles, where+" roles")
	if len(t.Among) > 0 && len(t.All)+len(t.Any) == 0 {
		sv.errorf(t.Among[0].Range, "Misplaced among", "among filters all and any; this tie sets neither.")
	}
	if len(t.Roles) > 0 && !sv.replicated(m.Name) {
		sv.errorf(t.Roles[0].Range, "Roles of a single machine",
			"roles ties a guard to the role of its own instance, but machine %q runs once per pod and has no role.", m.Name)
	}
}

func (sv *systemValidator) effect(e *Effect, effects map[string]*Effect) {
	where := fmt.Sprintf("effect %q %q", e.Machine.Name, e.Action.Name)
	m := sv.machine(e.Machine, where)
	if m == nil {
		return
	}
	if !sv.ref(machineNames(m, "action"), e.Action, where) {
		return
	}
	key := m.Name + "." + e.Action.Name
	if prev := effects[key]; prev != nil {
		sv.errorf(e.Action.Range, "Duplicate effect", "action %q of machine %q already has an effect at %s.", e.Action.Name, m.Name, prev.Range)
		return
	}
	effects[key] = e
	for _, r := range e.Sends {
		if r.Machine == m.Name {
			sv.errorf(r.Range, "Send to itself", "%s sends %s to its own machine; list the event in reports instead.", where, r)
			continue
		}
		sv.mrefs([]MRef{r}, "event", "", where+" sends")
	}
	sv.mrefs(e.Reports, "event", m.Name, where+" reports")
	sv.single(e.Requires, where+" requires")
}

// Parameter returns the parameter named name, or nil.
func (s *System) Parameter(name string) *Parameter {
	for _, p := range s.Parameters {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// given checks that refs name values of one parameter; a parameter of
// each instance (per_instance) only when instance is set (the tie or
// invariant is about an instance of the replicated machine).
func (sv *systemValidator) given(refs []MRef, where string, instance bool) {
	params := newNames("parameter")
	for _, p := range sv.s.System.Parameters {
		params.decl[p.Name] = p.Decl
		params.order = append(params.order, p.Name)
	}
	first := ""
	for _, r := range refs {
		if !sv.ref(params, Ref{Name: r.Machine, Range: r.Range}, where) {
			continue
		}
		if first != "" && r.Machine != first {
			sv.errorf(r.Range, "Mixed parameters", "%s names %s, but the list names values of parameter %q; one list names one parameter.", where, r, first)
			continue
		}
		if first == "" && sv.s.System.Parameter(r.Machine).PerInstance && !instance {
			sv.errorf(r.Range, "Parameter of an instance", "%s names %s, but parameter %q is per_instance: each instance of the replicated machine has its own value, and %s is not about one.", where, r, r.Machine, where)
		}
		first = r.Machine
		vals := newNames("value")
		for _, v := range sv.s.System.Parameter(r.Machine).Values {
			vals.decl[v.Name] = Decl{Name: v.Name}
			vals.order = append(vals.order, v.Name)
		}
		sv.ref(vals, Ref{Name: r.Name, Range: r.Range}, fmt.Sprintf("%s (parameter %q)", where, r.Machine))
	}
}

// flags checks that refs name flags of machine m.
func (sv *systemValidator) flags(refs []MRef, m *Machine, where string) {
	fl := newNames("flag")
	for _, f := range sv.s.System.Flags {
		if f.Machine.Name == m.Name {
			fl.decl[f.Name.Name] = Decl{Name: f.Name.Name}
			fl.order = append(fl.order, f.Name.Name)
		}
	}
	for _, r := range refs {
		if r.Machine != m.Name {
			sv.errorf(r.Range, "Wrong machine", "%s names %s, but it must name a flag of machine %q.", where, r, m.Name)
			continue
		}
		sv.ref(fl, Ref{Name: r.Name, Range: r.Range}, where)
	}
}

func (sv *systemValidator) single(refs []MRef, where string) *Machine {
	m := sv.mrefs(refs, "state", "", where)
	if m != nil && sv.replicated(m.Name) {
		sv.errorf(refs[0].Range, "Replicated machine", "%s names states of %q, which runs once per container; name states of a machine that runs once per pod.", where, m.Name)
		return nil
	}
	return m
}

func (sv *systemValidator) invariant(inv *Invariant) {
	where := fmt.Sprintf("invariant %q", inv.Name)
	switch inv.Kind {
	case InvNeverEnter:
		m := sv.mrefs(inv.NeverEnter, "state", "", where+" never_enter")
		sv.single(inv.While, where+" while")
		sv.given(inv.Given, where+" given", m != nil && sv.replicated(m.Name))
		sv.roles(inv.Among, where+" among")
		if m == nil {
			return
		}
		sv.mrefs(inv.From, "state", m.Name, where+" from")
		sv.flags(inv.Unless, m, where+" unless")
		if len(inv.Among) > 0 && !sv.replicated(m.Name) {
			sv.errorf(inv.Among[0].Range, "Roles of a single machine",
				"among filters the instances of the replicated machine by role, but machine %q runs once per pod and has no role.", m.Name)
		}
	case InvAlwaysIn:
		sv.mrefs(inv.AlwaysIn, "state", "", where+" always_in")
		sv.single(inv.While, where+" while")
	case InvLeaves:
		sv.mrefs(inv.Leaves, "state", "", where+" leaves")
	case InvRank:
		var all []MRef
		for _, t := range inv.Rank {
			all = append(all, t...)
		}
		m := sv.single(all, where+" rank")
		if m == nil {
			return
		}
		seen := map[string]MRef{}
		for _, r := range all {
			if prev, dup := seen[r.Name]; dup {
				sv.errorf(r.Range, "Duplicate rank", "state %s already has a tier at %s.", r, prev.Range)
			}
			seen[r.Name] = r
		}
		var missing []string
		for _, st := range m.States {
			if _, ok := seen[st.Name]; !ok {
				missing = append(missing, st.Name)
			}
		}
		if len(missing) > 0 && len(all) > 0 {
			sv.errorf(all[0].Range, "Incomplete rank", "%s ranks no tier for state(s) %s of machine %q; put each in a tier.", where, strings.Join(missing, ", "), m.Name)
		}
	case InvPhaseRank:
		sv.phaseRank(inv, where)
	case InvConditionNeverTrue:
		sv.conditionNeverTrue(inv, where)
	case InvAlwaysReaches:
		sv.single(inv.AlwaysReaches, where+" always_reaches")
	case InvAfterReaches:
		sv.mrefs([]MRef{inv.After}, "event", "", where+" after")
		sv.single(inv.Reaches, where+" reaches")
	}
}

// phase checks the phase block against the machines and parameters.
func (sv *systemValidator) phase(pm *PhaseMap) {
	where := "phase"
	rep := sv.s.System.Replicated.Name
	if rep == "" {
		sv.errorf(pm.Range, "No replicated machine", "the phase reads the containers, the instances of the replicated machine; declare one with `replicated \"container\" {}`.")
		return
	}
	sv.mrefs(pm.Running, "state", rep, where+" running")
	sv.mrefs(pm.Started, "state", rep, where+" started")
	if m := sv.s.Machine(rep); m != nil {
		sv.flags([]MRef{pm.ExitFailed}, m, where+" exit_failed")
	}
	pod := sv.single(pm.Terminating, where+" terminating")
	if t := sv.single(pm.Terminated, where+" terminated"); t != nil && pod != nil && t.Name != pod.Name {
		sv.errorf(pm.Terminated[0].Range, "Mixed machines", "%s terminated names states of %q, but terminating names states of %q; both are the pod worker's.", where, t.Name, pod.Name)
	}
	sv.given(pm.Policy, where+" policy", false)
	if len(pm.Policy) != 3 {
		sv.errorf(pm.Range, "Invalid policy", "phase policy must name the values of the restart policy parameter that mean Always, OnFailure and Never, in that order (3 values, not %d).", len(pm.Policy))
	} else if p := sv.s.System.Parameter(pm.Policy[0].Machine); p != nil && len(p.Values) != 3 {
		sv.errorf(pm.Policy[0].Range, "Invalid policy", "parameter %q has %d values; the phase maps exactly Always, OnFailure and Never.", p.Name, len(p.Values))
	}
}

// phaseRank checks a phase_rank invariant: tiers of phase.NAME, each phase
// once.
func (sv *systemValidator) phaseRank(inv *Invariant, where string) {
	if sv.s.System.Phase == nil {
		sv.errorf(inv.Range, "No phase block", "%s ranks the phase users see; declare how it reads the system with a `phase { ... }` block.", where)
	}
	n := newNames("phase")
	for _, p := range PhaseNames {
		n.decl[p] = Decl{Name: p}
		n.order = append(n.order, p)
	}
	seen := map[string]MRef{}
	for _, t := range inv.PhaseRank {
		for _, r := range t {
			if r.Machine != "phase" {
				sv.errorf(r.Range, "Invalid phase", "%s phase_rank names %s; name phases written phase.NAME (%s).", where, r, strings.Join(PhaseNames, ", "))
				continue
			}
			if !sv.ref(n, Ref{Name: r.Name, Range: r.Range}, where+" phase_rank") {
				continue
			}
			if prev, dup := seen[r.Name]; dup {
				sv.errorf(r.Range, "Duplicate rank", "phase %s already has a tier at %s.", r, prev.Range)
			}
			seen[r.Name] = r
		}
	}
	var missing []string
	for _, p := range PhaseNames {
		if _, ok := seen[p]; !ok {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		sv.errorf(inv.Range, "Incomplete rank", "%s ranks no tier for phase(s) %s; put each in a tier.", where, strings.Join(missing, ", "))
	}
}

func boolAttr(a *hcl.Attribute, diags *hcl.Diagnostics) bool {
	v, d := a.Expr.Value(nil)
	*diags = append(*diags, d...)
	if d.HasErrors() {
		return false
	}
	if v.Type() != cty.Bool || v.IsNull() || !v.IsKnown() {
		*diags = append(*diags, attrErr(a, "Invalid "+a.Name, a.Name+" must be true or false."))
		return false
	}
	return v.True()
}

func article(kind string) string {
	if strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an"
	}
	return "a"
}
