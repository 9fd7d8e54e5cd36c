package spec

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestEmbeddedSystem checks what spec/system.hcl declares once decoded.
func TestEmbeddedSystem(t *testing.T) {
	s, diags := Parse(Embedded())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	sys := s.System
	if sys.Replicated.Name != "container" {
		t.Errorf("replicated machine = %q, want container", sys.Replicated.Name)
	}
	tie := func(machine, guard string) *Tie {
		for _, ti := range sys.Ties {
			if ti.Machine.Name == machine && ti.Guard.Name == guard {
				return ti
			}
		}
		t.Fatalf("no tie of %s.%s", machine, guard)
		return nil
	}
	names := func(refs []MRef) []string {
		var out []string
		for _, r := range refs {
			out = append(out, r.String())
		}
		return out
	}
	if got := names(tie("container", "pod_terminating").In); !slices.Equal(got, []string{"pod.completing", "pod.completed", "pod.terminating", "pod.terminated", "pod.finished"}) {
		t.Errorf("pod_terminating in = %v", got)
	}
	var restart []*Tie
	for _, ti := range sys.Ties {
		if ti.Guard.Name == "restart_allowed" {
			restart = append(restart, ti)
		}
	}
	if len(restart) != 4 || restart[0].Roles[0].Name != "sidecar" || restart[0].Mode != "iff" ||
		names(restart[1].Given)[0] != "restart_policy.always" ||
		names(restart[2].Flags)[0] != "container.exit_failed" || restart[3].Mode != "may" {
		t.Errorf("restart_allowed ties = %+v", restart)
	}
	var params []string
	for _, p := range sys.Parameters {
		params = append(params, fmt.Sprintf("%s/%d/%v", p.Name, len(p.Values), p.PerInstance))
	}
	if want := []string{"admission/2/false", "pull_policy/3/true", "image_reference/2/true", "restart_policy/3/false"}; !slices.Equal(params, want) {
		t.Errorf("parameters (name/values/per instance) = %v, want %v", params, want)
	}
	for _, g := range [][3]string{{"pod", "admission_refused", "admission.refused"}, {"container", "pull_always", "pull_policy.always"}, {"container", "pull_never", "pull_policy.never"}, {"container", "image_invalid", "image_reference.invalid"}} {
		if got := names(tie(g[0], g[1]).Given); !slices.Equal(got, []string{g[2]}) {
			t.Errorf("%s.%s given = %v, want [%s]", g[0], g[1], got, g[2])
		}
	}
	if len(sys.Flags) != 1 || sys.Flags[0].Name.Name != "exit_failed" || sys.Flags[0].SetBy.String() != "container.record_exit" {
		t.Errorf("flags = %+v", sys.Flags)
	}
	if got := names(tie("pod", "all_containers_stopped").All); !slices.Contains(got, "container.terminated") || slices.Contains(got, "container.running") {
		t.Errorf("all_containers_stopped all = %v", got)
	}
	if ti := tie("pod", "pod_done"); ti.Mode != "if" || len(ti.Among) != 1 || ti.Among[0].Name != "regular" {
		t.Errorf("pod_done tie = %+v", ti)
	}
	effect := func(machine, action string) *Effect {
		for _, e := range sys.Effects {
			if e.Machine.Name == machine && e.Action.Name == action {
				return e
			}
		}
		t.Fatalf("no effect of %s.%s", machine, action)
		return nil
	}
	if e := effect("pod", "sync_pod"); !slices.Equal(names(e.Sends), []string{"container.update", "container.sandbox_died", "sandbox.create", "container.start"}) || !slices.Equal(names(e.Reports), []string{"pod.sync_ok", "pod.sync_failed"}) {
		t.Errorf("sync_pod effect: sends %v reports %v", names(e.Sends), names(e.Reports))
	}
	if e := effect("pod", "remove_pod"); !e.MayReportNothing || !slices.Equal(names(e.Sends), []string{"container.removed", "sandbox.removed"}) || !slices.Equal(names(e.Requires), []string{"sandbox.stopped"}) {
		t.Errorf("remove_pod effect = %+v", e)
	}
	if e := effect("container", "pull_image"); !slices.Equal(names(e.Reports), []string{"container.pull_ok", "container.pull_failed"}) {
		t.Errorf("pull_image reports %v", names(e.Reports))
	}
	var externals []string
	for _, x := range sys.Externals {
		externals = append(externals, x.Machine.Name+"."+x.Event.Name)
	}
	if want := []string{"pod.name_free", "probe.container_running", "probe.container_stopping", "probe.container_stopped", "probe.container_starting",
		"device_plugin.registered", "device_plugin.devices", "device_plugin.stream_ended"}; !slices.Equal(externals, want) {
		t.Errorf("externals = %v, want %v", externals, want)
	}
	kinds := map[string]string{}
	for _, inv := range sys.Invariants {
		kinds[inv.Name] = inv.Kind
		if inv.Doc == "" {
			t.Errorf("invariant %q has no doc", inv.Name)
		}
	}
	for name, kind := range map[string]string{
		"no_start_after_termination":       InvNeverEnter,
		"phase_never_backwards":            InvPhaseRank,
		"worker_never_backwards":           InvRank,
		"can_always_finish":                InvAlwaysReaches,
		"kill_finishes":                    InvAfterReaches,
		"no_restart_under_never":           InvNeverEnter,
		"containers_removed_when_finished": InvAlwaysIn,
		"container_stop_ends":              InvLeaves,
	} {
		if kinds[name] != kind {
			t.Errorf("invariant %q kind = %q, want %q", name, kinds[name], kind)
		}
	}
}

// TestSystemDecode decodes each construct from a small spec.
func TestSystemDecode(t *testing.T) {
	src := `
machine "p" {
  initial = state.a
  event "go" {}
  event "done" {}
  event "fail" {}
  guard "ok" {}
  action "act" {}
  state "a" {
    entry = [action.act]
    transition "go" {
      guard = guard.ok
      to    = state.b
    }
    transition "go" { to = state.a }
    transition "done" { to = state.b }
    transition "fail" {}
  }
  state "b" { final = true }
}
machine "c" {
  initial = state.x
  event "poke" {}
  guard "lead" {}
  action "note" {}
  state "x" {
    entry = [action.note]
    transition "poke" {
      guard = guard.lead
      to    = state.y
    }
    transition "poke" { to = state.y }
  }
  state "y" { final = true }
}
replicated "c" { doc = "many" }
tie "p" "ok" {
  any   = [c.y]
  among = [role.init, role.sidecar]
}
tie "c" "lead" {
  in    = [p.a]
  roles = [role.regular]
  mode  = "if"
}
effect "p" "act" {
  sends              = [c.poke]
  reports            = [p.done, p.fail]
  may_report_nothing = true
  requires           = [p.a]
}
invariant "never" {
  doc         = "d"
  never_enter = [c.y]
  while       = [p.b]
}
invariant "up" { rank = [[p.a], [p.b]] }
invariant "fin" { always_reaches = [p.b] }
invariant "kill" {
  after   = p.go
  reaches = [p.b]
}
parameter "policy" { values = ["a", "b"] }
flag "c" "failed" { set_by = c.note }
tie "c" "lead" {
  given = [policy.b]
  flags = [c.failed]
  mode  = "may"
}
invariant "restart" {
  never_enter = [c.y]
  from        = [c.x]
  given       = [policy.a]
  among       = [role.regular]
  unless      = [c.failed]
}
invariant "in" {
  always_in = [c.y]
  while     = [p.b]
}
invariant "out" { leaves = [c.x] }
restored "back" { states = [p.a, c.x, c.y] }
`
	s, diags := Parse([]File{{Name: "x.hcl", Src: []byte(src)}})
	for _, d := range diags {
		t.Errorf("%s", Line(d))
	}
	sys := s.System
	if sys.Replicated.Name != "c" || len(sys.Ties) != 3 || len(sys.Effects) != 1 || len(sys.Invariants) != 7 {
		t.Fatalf("system = %+v", sys)
	}
	if p := sys.Parameters; len(p) != 1 || p[0].Name != "policy" || len(p[0].Values) != 2 || p[0].Values[1].Name != "b" {
		t.Errorf("parameters = %+v", p)
	}
	if f := sys.Flags; len(f) != 1 || f[0].Machine.Name != "c" || f[0].Name.Name != "failed" || f[0].SetBy.String() != "c.note" {
		t.Errorf("flags = %+v", f)
	}
	if ti := sys.Ties[2]; ti.Mode != "may" || len(ti.Given) != 1 || ti.Given[0].String() != "policy.b" || len(ti.Flags) != 1 {
		t.Errorf("tie c.lead (may) = %+v", ti)
	}
	if e := sys.Effects[0]; len(e.Requires) != 1 || e.Requires[0].String() != "p.a" {
		t.Errorf("effect requires = %+v", e)
	}
	if iv := sys.Invariants[4]; iv.Kind != InvNeverEnter || len(iv.From) != 1 || len(iv.Given) != 1 || iv.Among[0].Name != "regular" || iv.Unless[0].String() != "c.failed" {
		t.Errorf("invariant restart = %+v", iv)
	}
	if iv := sys.Invariants[5]; iv.Kind != InvAlwaysIn || len(iv.AlwaysIn) != 1 || len(iv.While) != 1 {
		t.Errorf("invariant in = %+v", iv)
	}
	if r := sys.Restored; len(r) != 1 || r[0].Name != "back" || len(r[0].States) != 3 || r[0].States[2].String() != "c.y" {
		t.Errorf("restored = %+v", r)
	}
	if iv := sys.Invariants[6]; iv.Kind != InvLeaves || iv.Leaves[0].String() != "c.x" {
		t.Errorf("invariant out = %+v", iv)
	}
	if ti := sys.Ties[0]; len(ti.Any) != 1 || ti.Any[0].String() != "c.y" || len(ti.Among) != 2 || ti.Mode != "iff" {
		t.Errorf("tie p.ok = %+v", ti)
	}
	if ti := sys.Ties[1]; len(ti.In) != 1 || ti.Roles[0].Name != "regular" || ti.Mode != "if" {
		t.Errorf("tie c.lead = %+v", ti)
	}
	if e := sys.Effects[0]; len(e.Sends) != 1 || len(e.Reports) != 2 || !e.MayReportNothing {
		t.Errorf("effect = %+v", e)
	}
	inv := sys.Invariants
	if inv[0].Kind != InvNeverEnter || inv[0].Doc != "d" || len(inv[0].While) != 1 ||
		inv[1].Kind != InvRank || len(inv[1].Rank) != 2 ||
		inv[2].Kind != InvAlwaysReaches ||
		inv[3].Kind != InvAfterReaches || inv[3].After.String() != "p.go" || len(inv[3].Reaches) != 1 {
		t.Errorf("invariants = %+v %+v %+v %+v", inv[0], inv[1], inv[2], inv[3])
	}
	// Positions point into the file.
	if r := inv[3].After.Range; r.Filename != "x.hcl" || r.Start.Line == 0 {
		t.Errorf("after range = %v", r)
	}
}

// TestSystemErrorsHaveHints: a typo in a system reference suggests the name.
func TestSystemErrorsHaveHints(t *testing.T) {
	files := Embedded()
	for i, f := range files {
		if strings.HasSuffix(f.Name, "system.hcl") {
			files[i].Src = []byte(strings.Replace(string(f.Src), "pod.terminating, pod.terminated", "pod.terminatin, pod.terminated", 1))
		}
	}
	_, diags := Parse(files)
	if !diags.HasErrors() {
		t.Fatal("accepted a reference to pod.terminatin")
	}
	got := Line(diags[0])
	if !strings.Contains(got, "spec/system.hcl:") || !strings.Contains(got, `Did you mean "terminating"?`) {
		t.Errorf("diagnostic = %s", got)
	}
}

// TestPerInstanceParameter: a per_instance parameter decodes as such, ties
// and invariants of the replicated machine may name it, and those of a
// once-per-pod machine may not (each instance has its own value).
func TestPerInstanceParameter(t *testing.T) {
	src := `
machine "p" {
  initial = state.a
  event "go" {}
  guard "ok" {}
  state "a" {
    transition "go" {
      guard = guard.ok
      to    = state.b
    }
    transition "go" { to = state.b }
  }
  state "b" { final = true }
}
machine "c" {
  initial = state.x
  event "poke" {}
  guard "lead" {}
  state "x" {
    transition "poke" {
      guard = guard.lead
      to    = state.y
    }
    transition "poke" { to = state.y }
  }
  state "y" { final = true }
}
replicated "c" {}
parameter "pull" {
  per_instance = true
  values       = ["always", "never"]
}
tie "c" "lead" { given = [pull.always] }
invariant "never_y" {
  never_enter = [c.y]
  given       = [pull.never]
}
`
	s, diags := Parse([]File{{Name: "x.hcl", Src: []byte(src)}})
	for _, d := range diags {
		t.Errorf("%s", Line(d))
	}
	if p := s.System.Parameter("pull"); p == nil || !p.PerInstance {
		t.Fatalf("parameter pull = %+v", p)
	}
	for _, bad := range []string{
		`tie "p" "ok" { given = [pull.always] }`,
		"invariant \"never_b\" {\n  never_enter = [p.b]\n  given       = [pull.never]\n}",
	} {
		_, diags := Parse([]File{{Name: "x.hcl", Src: []byte(src + bad + "\n")}})
		if !diags.HasErrors() {
			t.Errorf("accepted %s", bad)
			continue
		}
		if got := Line(diags[0]); !strings.Contains(got, "Parameter of an instance") || !strings.Contains(got, "x.hcl:") {
			t.Errorf("%s: diagnostic = %s", bad, got)
		}
	}
}
