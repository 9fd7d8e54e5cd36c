package spec

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// CondMap says how the pod conditions users see (podphase.ConditionsOf,
// the function the engine's status calls) read a state of the system,
// declared by the block `conditions { ... }`. They read the phase block's
// facts (each container's state and last exit, the pod worker's
// terminating) and the phase the status shows, plus: a container serves
// (runs and its probes say ready; podphase.ContainerReady) while it is in
// one of Serving and the probe machine in one of ProbeReady; a container
// that exited shows its exit (its status is terminated, not waiting) in one
// of ShowsExit; the sandbox is ready in one of SandboxReady. A sidecar ran
// when the phase block sees it run or exited. The readiness gates are
// taken to pass (the condition invariants say when a condition may be
// True: gates that pass are the case where Ready is True most often).
type CondMap struct {
	Doc          string
	Serving      []MRef
	ProbeReady   []MRef
	ShowsExit    []MRef
	SandboxReady []MRef
	Range        hcl.Range
}

// ConditionNames are the conditions a condition invariant names
// (condition.NAME), in the order of podphase.CondNames.
var ConditionNames = []string{"ready_to_start_containers", "initialized", "ready", "containers_ready"}

// InvConditionNeverTrue: the condition ConditionNeverTrue (condition.NAME)
// is not True at any status the engine publishes (every state between
// inputs) where the machine of While is in one of While (when given) and
// the phase the status shows is one of Phases (when given).
const InvConditionNeverTrue = "condition_never_true"

var conditionsSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "doc"}, {Name: "serving", Required: true}, {Name: "probe_ready", Required: true},
	{Name: "shows_exit", Required: true}, {Name: "sandbox_ready", Required: true},
}}

// decodeConditions decodes a conditions block into sys.
func decodeConditions(sys *System, b *hcl.Block) hcl.Diagnostics {
	cm := &CondMap{Range: b.DefRange}
	c, diags := b.Body.Content(conditionsSchema)
	cm.Doc = stringAttr(c.Attributes["doc"], &diags)
	cm.Serving = mrefListAttr(c.Attributes["serving"], &diags)
	cm.ProbeReady = mrefListAttr(c.Attributes["probe_ready"], &diags)
	cm.ShowsExit = mrefListAttr(c.Attributes["shows_exit"], &diags)
	cm.SandboxReady = mrefListAttr(c.Attributes["sandbox_ready"], &diags)
	if sys.Conditions != nil {
		return append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError, Summary: "Duplicate conditions",
			Detail:  fmt.Sprintf("The conditions block is already declared at %s.", sys.Conditions.Range),
			Subject: b.DefRange.Ptr(),
		})
	}
	sys.Conditions = cm
	return diags
}

// conditions checks the conditions block against the machines.
func (sv *systemValidator) conditions(cm *CondMap) {
	where := "conditions"
	if sv.s.System.Phase == nil {
		sv.errorf(cm.Range, "No phase block", "the conditions read the phase block's facts (each container's state and exit, the pod worker's termination); declare a `phase { ... }` block.")
	}
	rep := sv.s.System.Replicated.Name
	if rep == "" {
		sv.errorf(cm.Range, "No replicated machine", "the conditions read the containers, the instances of the replicated machine; declare one with `replicated \"container\" {}`.")
		return
	}
	sv.mrefs(cm.Serving, "state", rep, where+" serving")
	sv.mrefs(cm.ShowsExit, "state", rep, where+" shows_exit")
	sv.single(cm.ProbeReady, where+" probe_ready")
	sv.single(cm.SandboxReady, where+" sandbox_ready")
}

// conditionNeverTrue checks a condition_never_true invariant.
func (sv *systemValidator) conditionNeverTrue(inv *Invariant, where string) {
	if sv.s.System.Conditions == nil {
		sv.errorf(inv.Range, "No conditions block", "%s is about a condition users see; declare how the conditions read the system with a `conditions { ... }` block.", where)
	}
	if r := inv.ConditionNeverTrue; r.Machine != "condition" {
		sv.errorf(r.Range, "Invalid condition", "%s condition_never_true names %s; name a condition written condition.NAME (%s).", where, r, strings.Join(ConditionNames, ", "))
	} else {
		n := newNames("condition")
		for _, c := range ConditionNames {
			n.decl[c] = Decl{Name: c}
			n.order = append(n.order, c)
		}
		sv.ref(n, Ref{Name: r.Name, Range: r.Range}, where+" condition_never_true")
	}
	sv.single(inv.While, where+" while")
	n := newNames("phase")
	for _, p := range PhaseNames {
		n.decl[p] = Decl{Name: p}
		n.order = append(n.order, p)
	}
	for _, r := range inv.Phases {
		if r.Machine != "phase" {
			sv.errorf(r.Range, "Invalid phase", "%s phases names %s; name phases written phase.NAME (%s).", where, r, strings.Join(PhaseNames, ", "))
			continue
		}
		sv.ref(n, Ref{Name: r.Name, Range: r.Range}, where+" phases")
	}
}
