package verify

import (
	"slices"
	"strings"
	"testing"

	"github.com/speclet/speclet/spec"
)

func nameModelOf(t *testing.T, n int) *nameModel {
	t.Helper()
	s, diags := spec.Parse(spec.Embedded())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	md, err := compile(s)
	if err != nil {
		t.Fatal(err)
	}
	nm := newNameModel(md, n)
	if nm == nil {
		t.Fatal("the embedded spec has no name model")
	}
	return nm
}

// TestNameModel: the embedded spec keeps the name invariants with 2 and 3
// pods, each checked somewhere.
func TestNameModel(t *testing.T) {
	for n := 2; n <= 3; n++ {
		nm := nameModelOf(t, n)
		for _, ir := range nm.explore() {
			t.Logf("N=%d %s: %d checks", n, ir.Name, ir.Checks)
			if ir.Violation != nil {
				t.Errorf("N=%d %s violated:\n%s\n=> %s", n, ir.Name, strings.Join(ir.Violation.Trace, "\n"), ir.Violation.Detail)
			}
			if ir.Checks == 0 {
				t.Errorf("N=%d %s never checked", n, ir.Name)
			}
		}
		t.Logf("N=%d: %d states, %d transitions", n, nm.r.keys.len(), len(nm.r.edgeTo))
	}
}

// TestNameModelMutations: an engine whose name FIFO is broken violates the
// name invariant that guards against it, with a trace.
func TestNameModelMutations(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutate    func(nm *nameModel)
		invariant string
		inTrace   string
	}{
		{
			// release_name leaves the queue but posts no name_free: the
			// successor waits forever.
			name: "release posts no name_free",
			mutate: func(nm *nameModel) {
				nm.releaseFn = func(s *nstate, i int) int {
					if p := slices.Index(s.queue, uint8(i)); p >= 0 {
						s.queue = slices.Delete(s.queue, p, p+1)
					}
					return -1
				}
			},
			invariant: "name_successor_starts", inTrace: "name_taken=true(tied)]--> waiting_to_start",
		},
		{
			// name_taken ignores the queue's order: taken only while
			// another queued pod has started, so a later pod overtakes
			// the head that waits for its name_free.
			name: "name_taken ignores queue order",
			mutate: func(nm *nameModel) {
				nm.r.guardHook = func(_ *sys, inst, g int) (bool, bool) {
					if g != nm.taken {
						return false, false
					}
					for _, p := range nm.cur.queue {
						if int(p) != inst && nm.cur.bits[p]&nbStarted != 0 {
							return true, true
						}
					}
					return false, true
				}
			},
			invariant: "name_fifo", inTrace: "name_taken=false(tied)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nm := nameModelOf(t, 3)
			tc.mutate(nm)
			for _, ir := range nm.explore() {
				if ir.Name != tc.invariant {
					continue
				}
				v := ir.Violation
				if v == nil {
					t.Fatalf("%s holds", ir.Name)
				}
				trace := strings.Join(v.Trace, "\n")
				t.Logf("%s violated with %d pods:\n%s\n=> %s", ir.Name, v.K, trace, v.Detail)
				if !strings.HasPrefix(v.Trace[0], "input ") || !strings.HasPrefix(v.Trace[len(v.Trace)-1], "state: ") {
					t.Errorf("trace does not start with an input and end with the state")
				}
				if !strings.Contains(trace, tc.inTrace) {
					t.Errorf("trace has no step %q", tc.inTrace)
				}
				return
			}
			t.Fatalf("no invariant %s", tc.invariant)
		})
	}
}

// TestNameTaken: the tie over every queue of up to three UIDs.
func TestNameTaken(t *testing.T) {
	for _, tc := range []struct {
		queue []int
		uid   int
		want  bool
	}{
		{nil, 0, false},
		{[]int{0}, 0, false},
		{[]int{0}, 1, false}, // not queued: not a static pod of this name
		{[]int{0, 1}, 1, true},
		{[]int{1, 0}, 1, false},
		{[]int{0, 1, 2}, 2, true},
	} {
		if got := NameTaken(tc.queue, tc.uid); got != tc.want {
			t.Errorf("NameTaken(%v, %d) = %v, want %v", tc.queue, tc.uid, got, tc.want)
		}
	}
}
