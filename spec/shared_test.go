package spec

import (
	"fmt"
	"strings"
	"testing"
)

// rows lists the transitions of m as "state event guard -> to [actions] doc",
// one per row in table order.
func rows(m *Machine) []string {
	var out []string
	for _, st := range m.States {
		for _, tm := range st.Timers {
			out = append(out, fmt.Sprintf("%s timeout %s after %s", st.Name, tm.Event.Name, tm.After.Name))
		}
		for _, t := range st.Transitions {
			var acts []string
			for _, a := range t.Actions {
				acts = append(acts, a.Name)
			}
			out = append(out, fmt.Sprintf("%s %s %s -> %s %v %q", st.Name, t.Event.Name, t.Guard.Name, t.To.Name, acts, t.Doc))
		}
		var entry []string
		for _, a := range st.Entry {
			entry = append(entry, a.Name)
		}
		out = append(out, fmt.Sprintf("%s entry %v", st.Name, entry))
	}
	return out
}

// sharedHeader declares what the shared-block tests refer to.
const sharedHeader = `machine "m" {
  initial = state.a
  event "go" {}
  event "stop" {}
  event "tick" {}
  guard "ok" {}
  action "act" {}
  duration "wait" {}
`

// TestSharedExpands: a use is the shared block written at its place, each
// param.NAME replaced by the value the use gives.
func TestSharedExpands(t *testing.T) {
	shared := sharedHeader + `  shared "leave" {
    entry = [action.act]
    timeout "tick" { after = duration.wait }
    transition "tick" {}
    transition "stop" {
      guard = guard.ok
      to    = param.done
      doc   = param.why
    }
  }
  state "a" {
    transition "go" { to = state.b }
    use "leave" {
      done = state.c
      why  = "from a"
    }
    transition "stop" { to = state.a }
  }
  state "b" {
    use "leave" {
      why  = "from b"
      done = state.b
    }
    transition "stop" { to = state.c }
  }
  state "c" { final = true }
}
`
	written := sharedHeader + `  state "a" {
    entry = [action.act]
    timeout "tick" { after = duration.wait }
    transition "go" { to = state.b }
    transition "tick" {}
    transition "stop" {
      guard = guard.ok
      to    = state.c
      doc   = "from a"
    }
    transition "stop" { to = state.a }
  }
  state "b" {
    entry = [action.act]
    timeout "tick" { after = duration.wait }
    transition "tick" {}
    transition "stop" {
      guard = guard.ok
      to    = state.b
      doc   = "from b"
    }
    transition "stop" { to = state.c }
  }
  state "c" { final = true }
}
`
	var got [2][]string
	for i, src := range []string{shared, written} {
		s, diags := Parse([]File{{Name: "m.hcl", Src: []byte(src)}})
		for _, d := range diags {
			t.Errorf("%d: %s", i, Line(d))
		}
		got[i] = rows(s.Machine("m"))
	}
	if strings.Join(got[0], "\n") != strings.Join(got[1], "\n") {
		t.Errorf("shared rows:\n%s\nwant, as written out:\n%s", strings.Join(got[0], "\n"), strings.Join(got[1], "\n"))
	}
	s, _ := Parse([]File{{Name: "m.hcl", Src: []byte(shared)}})
	if tr := s.Machine("m").State("a").Transitions[2]; tr.Via == nil || tr.Via.Shared.Name != "leave" || tr.Via.Range.Start.Line != 21 {
		t.Errorf("row from shared: Via = %+v, want the use at line 21", tr.Via)
	}
}

// TestSharedErrors: each misuse of shared and use is a positioned error (or
// warning) naming the shared block, the use or the parameter.
func TestSharedErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string
	}{{
		name: "unknown shared",
		body: `  shared "leave" {
    transition "stop" { to = state.b }
  }
  state "a" {
    transition "go" { to = state.b }
    use "leav" {}
  }
  state "b" { final = true }
`,
		want: []string{
			`m.hcl:14:9: error: Unknown shared block: state "a" uses shared "leav", which is not declared. Did you mean "leave"?`,
			`m.hcl:9:10: warning: Unused shared block: shared "leave" of machine "m" is declared but no state uses it.`,
		},
	}, {
		name: "unknown state given to a parameter",
		body: `  shared "leave" {
    transition "stop" { to = param.done }
  }
  state "a" {
    transition "go" { to = state.b }
    use "leave" { done = state.bb }
  }
  state "b" { final = true }
`,
		want: []string{`m.hcl:14:26: error: Unknown state: shared "leave" transition "stop" refers to state "bb", which is not declared. Did you mean "b"?`},
	}, {
		name: "unknown state in a shared block, used twice, reported once",
		body: `  shared "leave" {
    transition "stop" { to = state.cc }
  }
  state "a" {
    transition "go" { to = state.b }
    use "leave" {}
  }
  state "b" {
    transition "go" { to = state.c }
    use "leave" {}
  }
  state "c" { final = true }
`,
		want: []string{`m.hcl:10:30: error: Unknown state: shared "leave" transition "stop" refers to state "cc", which is not declared. Did you mean "c"?`},
	}, {
		name: "shared row conflicts with the state's own",
		body: `  shared "leave" {
    transition "stop" { to = state.b }
  }
  state "a" {
    transition "stop" { to = state.b }
    use "leave" {}
  }
  state "b" { final = true }
`,
		want: []string{`m.hcl:14:5: error: Ambiguous transition: state "a" has two unguarded transitions on "stop" (the other at m.hcl:13,5-22) (from shared "leave", at m.hcl:10,5-22); guard one of them.`},
	}, {
		name: "state row shadowed by a shared one",
		body: `  shared "leave" {
    transition "stop" { to = state.b }
  }
  state "a" {
    use "leave" {}
    transition "stop" {
      guard = guard.ok
      to    = state.b
    }
  }
  state "b" { final = true }
`,
		want: []string{`m.hcl:14:5: error: Shadowed transition: state "a" already has an unguarded transition on "stop" at m.hcl:10,5-22, from shared "leave" used at m.hcl:13,5-16, so this guarded one is never tried; put guarded transitions first.`},
	}, {
		name: "missing and unused parameters",
		body: `  shared "leave" {
    transition "stop" { to = param.done }
  }
  state "a" {
    transition "go" { to = state.b }
    use "leave" { don = state.b }
  }
  state "b" { final = true }
`,
		want: []string{
			`m.hcl:14:5: error: Missing parameter: This use of shared "leave" gives no value for param.done, which to refers to at m.hcl:10,30-40.`,
			`m.hcl:14:19: error: Unused parameter: shared "leave" refers to no param.don, so this value would be ignored.`,
		},
	}, {
		name: "parameter outside a shared block",
		body: `  state "a" {
    transition "go" { to = param.next }
    transition "stop" { to = state.b }
  }
  state "b" { final = true }
`,
		want: []string{`m.hcl:10:28: error: Parameter outside a shared block: to = param.next: only the blocks of a shared block may refer to a parameter, whose value each use gives.`},
	}, {
		name: "entry given twice",
		body: `  shared "leave" {
    entry = [action.act]
    transition "stop" { to = state.b }
  }
  state "a" {
    entry = [action.act]
    use "leave" {}
  }
  state "b" { final = true }
`,
		want: []string{`m.hcl:15:5: error: Entry given twice: state "a" has an entry list already, and shared "leave" gives another at m.hcl:10,5-25; a state has one entry list.`},
	}, {
		name: "shared used twice",
		body: `  shared "leave" {
    timeout "tick" { after = duration.wait }
  }
  state "a" {
    use "leave" {}
    use "leave" {}
    transition "tick" { to = state.b }
  }
  state "b" { final = true }
`,
		want: []string{`m.hcl:14:5: error: Shared block used twice: state "a" already uses shared "leave" at m.hcl:13,5-16; its rows would be tried twice.`},
	}, {
		name: "duplicate and unused shared blocks",
		body: `  shared "leave" {
    transition "stop" { to = state.b }
  }
  shared "leave" {
    transition "go" { to = state.b }
  }
  shared "spare" {
    transition "go" { to = state.b }
  }
  state "a" {
    use "leave" {}
  }
  state "b" { final = true }
`,
		want: []string{
			`m.hcl:12:10: error: Duplicate shared block: shared "leave" is already declared at m.hcl:9,10-17.`,
			`m.hcl:15:10: warning: Unused shared block: shared "spare" of machine "m" is declared but no state uses it.`,
		},
	}, {
		name: "unused shared block",
		body: `  shared "spare" {
    transition "go" { to = state.b }
  }
  state "a" {
    transition "go" { to = state.b }
  }
  state "b" { final = true }
`,
		want: []string{`m.hcl:9:10: warning: Unused shared block: shared "spare" of machine "m" is declared but no state uses it.`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			src := sharedHeader + tc.body + "}\n"
			_, diags := Parse([]File{{Name: "m.hcl", Src: []byte(src)}})
			var got []string
			for _, d := range diags {
				if d.Summary == "Unused guard" || d.Summary == "Unused action" || d.Summary == "Unused duration" {
					continue
				}
				got = append(got, Line(d))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
