// Package optest drives an action's operations (engine/op) in a test: it
// feeds each operation the reply a runtime or the host would give,
// checking that the operation is the one expected and that each CRI call
// is one the action's spec declares.
package optest

import (
	"slices"
	"testing"

	"github.com/speclet/speclet/engine/op"
)

// Step is one operation an action is expected to ask for, its name and
// what it is about (as the test's About names it), and the result the
// test feeds it.
type Step struct {
	Op, About string
	V         any
	Err       error
}

// Drive feeds o the steps in order and returns the op that ends the
// action. It fails the test when an operation is not the step's, when a
// CRI call is not one of declared (the action's spec `cri` list, which
// the CRI audit holds the real calls to), or when the action asks for more
// than the steps. about names what an operation is about.
func Drive(t testing.TB, o op.Op, declared []string, about func(op.Op) string, steps []Step) op.Op {
	t.Helper()
	for i, s := range steps {
		if o.Done() {
			t.Fatalf("step %d: the action ended (%v), want %s about %q", i, o.Err(), s.Op, s.About)
		}
		if o.CRI() && !slices.Contains(declared, o.Name()) {
			t.Fatalf("step %d: %s is not in the action's cri list %q", i, o, declared)
		}
		if got := about(o); o.Name() != s.Op || got != s.About {
			t.Fatalf("step %d: %s about %q, want %s about %q", i, o, got, s.Op, s.About)
		}
		o = o.Reply(s.V, s.Err)
	}
	if !o.Done() {
		t.Fatalf("after every step the action asks for %s about %q", o, about(o))
	}
	return o
}
