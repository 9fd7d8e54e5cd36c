package names

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/verify"
)

// queue is the queue of full, holder first.
func (n *Queues) queue(full string) []types.UID { return n.q[full] }

// TestQueues walks the lifecycle of one full name: pods are queued as the
// sync loop creates their workers, the holder releases it as its pod stops
// for good, and the name goes to the oldest waiter whose pod still runs.
func TestQueues(t *testing.T) {
	const web = "web_default"
	type step struct {
		do       string // add, release
		uid      types.UID
		gone     []types.UID // for release: the UIDs whose pod will never ask again
		next     types.UID   // for release: who is told name_free ("" none)
		queue    []types.UID // the queue after the step
		taken    []types.UID // after the step, the UIDs Taken refuses
		notTaken []types.UID // after the step, the UIDs Taken lets start
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{{
		name: "a successor waits for the holder, then holds",
		steps: []step{
			{do: "add", uid: "a", queue: []types.UID{"a"}, notTaken: []types.UID{"a", "x"}},
			{do: "add", uid: "b", queue: []types.UID{"a", "b"}, taken: []types.UID{"b"}, notTaken: []types.UID{"a", "x"}},
			{do: "add", uid: "b", queue: []types.UID{"a", "b"}, taken: []types.UID{"b"}},
			{do: "release", uid: "a", next: "b", queue: []types.UID{"b"}, notTaken: []types.UID{"a", "b"}},
			{do: "release", uid: "b", queue: nil, notTaken: []types.UID{"b"}},
		},
	}, {
		name: "waiters leave in any order; only the holder's release tells",
		steps: []step{
			{do: "add", uid: "a"}, {do: "add", uid: "b"}, {do: "add", uid: "c", queue: []types.UID{"a", "b", "c"}, taken: []types.UID{"b", "c"}},
			{do: "release", uid: "b", queue: []types.UID{"a", "c"}, taken: []types.UID{"c"}},
			{do: "release", uid: "a", next: "c", queue: []types.UID{"c"}, notTaken: []types.UID{"c"}},
		},
	}, {
		name: "a purged waiter at the head is skipped",
		steps: []step{
			{do: "add", uid: "a"}, {do: "add", uid: "b"}, {do: "add", uid: "c"},
			{do: "release", uid: "a", gone: []types.UID{"b"}, next: "c", queue: []types.UID{"c"}},
		},
	}, {
		name: "every waiter purged: the name is free",
		steps: []step{
			{do: "add", uid: "a"}, {do: "add", uid: "b"},
			{do: "release", uid: "a", gone: []types.UID{"b"}, queue: nil},
			{do: "add", uid: "d", queue: []types.UID{"d"}, notTaken: []types.UID{"d"}},
		},
	}, {
		name: "a UID that was never queued releases nothing",
		steps: []step{
			{do: "add", uid: "a"},
			{do: "release", uid: "x", queue: []types.UID{"a"}, notTaken: []types.UID{"a"}},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var n Queues
			for i, s := range tc.steps {
				switch s.do {
				case "add":
					n.Add(web, s.uid)
				case "release":
					next, ok := n.Release(web, s.uid, func(u types.UID) bool { return slices.Contains(s.gone, u) })
					if ok != (s.next != "") || next != s.next {
						t.Errorf("step %d: release %s told %q (%v), want %q", i, s.uid, next, ok, s.next)
					}
				}
				if s.queue != nil || s.do == "release" {
					if got := n.queue(web); !slices.Equal(got, s.queue) {
						t.Errorf("step %d (%s %s): queue %v, want %v", i, s.do, s.uid, got, s.queue)
					}
				}
				for _, u := range s.taken {
					if !n.Taken(web, u) {
						t.Errorf("step %d: %s may start, want the name taken", i, u)
					}
				}
				for _, u := range s.notTaken {
					if n.Taken(web, u) {
						t.Errorf("step %d: %s is refused, want it free to start", i, u)
					}
				}
			}
			if n.Taken("other_default", "a") {
				t.Error("another full name is taken")
			}
		})
	}
}

// TestTakenMatchesTie: Taken over every queue of up to three UIDs (each
// order) and every UID, queued or not, agrees with the name model's tie of
// guard name_taken (verify.NameTaken).
func TestTakenMatchesTie(t *testing.T) {
	uids := []types.UID{"a", "b", "c", "d"}
	var queues [][]types.UID
	var grow func(q []types.UID)
	grow = func(q []types.UID) {
		queues = append(queues, q)
		if len(q) == 3 {
			return
		}
		for _, u := range uids[:3] {
			if !slices.Contains(q, u) {
				grow(append(slices.Clip(q), u))
			}
		}
	}
	grow(nil)
	if len(queues) != 16 {
		t.Fatalf("%d queues, want 16", len(queues))
	}
	for _, q := range queues {
		var n Queues
		for _, u := range q {
			n.Add("web_default", u)
		}
		for _, u := range uids {
			if got, want := n.Taken("web_default", u), verify.NameTaken(q, u); got != want {
				t.Errorf("queue %v, uid %s: Taken %v, tie %v", q, u, got, want)
			}
		}
	}
}
