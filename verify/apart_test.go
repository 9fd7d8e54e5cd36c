package verify

import (
	"strings"
	"testing"

	"github.com/speclet/speclet/spec"
)

// apartSpec: a container machine c driven by an input, and a machine plug
// that only externals drive; its invariant holds or not by the extra rows.
const apartSpec = `
machine "c" {
  initial = state.a
  event "go" {}
  state "a" {
    transition "go" { to = state.b }
  }
  state "b" {
    transition "go" { to = state.a }
  }
}

machine "plug" {
  initial = state.off
  event "up" {}
  event "down" {}
  state "off" {
    transition "up" { to = state.on }
  }
  state "on" {
    transition "down" { to = state.off }
    transition "up" { to = state.dead }
  }
  state "dead" {
    transition "up" { to = state.on }
  }
}

replicated "c" {}
input "poke" { c = c.go }
external "plug" "up" {}
external "plug" "down" {}
`

// TestApart: a machine nothing couples to the replicated one is explored
// on its own, once, not in the product of every K: the pod's runs have the
// states of the containers alone, the run apart those of plug, and plug's
// invariant is checked there (a violation is found, with K 0); a tie
// reading plug's state couples it, and it is explored in the product.
func TestApart(t *testing.T) {
	holds := `invariant "never_dead_from_off" {
  never_enter = [plug.dead]
  from        = [plug.off]
}
`
	rep := check(t, []spec.File{{Name: "apart.hcl", Src: []byte(apartSpec + holds)}}, 2)
	if len(rep.Apart) != 1 || strings.Join(rep.Apart[0].Machines, ",") != "plug" || rep.Apart[0].K != 0 {
		t.Fatalf("runs apart %+v, want one of plug", rep.Apart)
	}
	// Between inputs: c's instances (2 states each), K=1 and K=2.
	if r := rep.Runs[0]; r.Resting != 2 {
		t.Errorf("K=1: %d states between inputs, want the container's 2 (plug is apart)", r.Resting)
	}
	if r := rep.Apart[0]; r.Resting != 3 {
		t.Errorf("apart: %d states between inputs, want plug's 3", r.Resting)
	}
	if !rep.OK() {
		t.Errorf("never_dead_from_off violated: %+v", rep.Invariants[0].Violation)
	}

	broken := strings.Replace(apartSpec, `transition "up" { to = state.on }`, `transition "up" { to = state.dead }`, 1)
	rep = check(t, []spec.File{{Name: "apart.hcl", Src: []byte(broken + holds)}}, 2)
	v := rep.Invariants[0].Violation
	if v == nil || v.K != 0 || !strings.Contains(strings.Join(v.Trace, "\n"), "plug off --up--> dead") {
		t.Fatalf("a row from off into dead: violation %+v, want one with K 0 through plug's down", v)
	}

	coupled := strings.Replace(apartSpec, `event "go" {}`, `event "go" {}
  guard "plugged" {}`, 1)
	coupled = strings.Replace(coupled, `transition "go" { to = state.b }`, `transition "go" {
      guard = guard.plugged
      to    = state.b
    }`, 1)
	coupled += `tie "c" "plugged" { in = [plug.on] }
`
	rep = check(t, []spec.File{{Name: "apart.hcl", Src: []byte(coupled + holds)}}, 1)
	if len(rep.Apart) != 0 {
		t.Errorf("a tie reads plug: runs apart %+v, want none", rep.Apart)
	}
	if r := rep.Runs[0]; r.Resting != 6 {
		t.Errorf("coupled, K=1: %d states between inputs, want 2 x 3", r.Resting)
	}
}
