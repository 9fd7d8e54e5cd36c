// Package names keeps the static pod full names (name_namespace): at most
// one started pod per full name, its successors waiting in arrival order
// (kubelet's pod workers' startedStaticPodsByFullname and
// waitingToStartStaticPodsByFullname). It is the state behind the pod
// machine's guard name_taken and action release_name (spec/pod.hcl); the
// name model of `speclet spec verify` (verify/names.go) checks the same
// rules, and TestTakenMatchesTie ties Taken to it.
//
// A Queues is not safe for concurrent use: the engine holds its lock
// around every call.
package names

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"
)

// Queues is, per full name, the UID holding it (first) and the UIDs
// waiting for it, in arrival order. The zero value is empty and ready.
type Queues struct {
	q map[string][]types.UID
}

// Add queues uid under full unless it is queued there already: a UID
// keeps its first place.
func (n *Queues) Add(full string, uid types.UID) {
	if slices.Contains(n.q[full], uid) {
		return
	}
	if n.q == nil {
		n.q = map[string][]types.UID{}
	}
	n.q[full] = append(n.q[full], uid)
}

// Taken reports whether another UID holds full or waits for it ahead of
// uid. A UID that is not queued does not take part (not a static pod) and
// is never refused.
func (n *Queues) Taken(full string, uid types.UID) bool {
	q := n.q[full]
	return len(q) > 0 && q[0] != uid && slices.Contains(q, uid)
}

// Release removes uid from the queue of full. The UIDs that gone reports
// (their pod will never ask again) are dropped from the head of what is
// left. When uid held the name and a UID is left, that UID is returned
// with ok: it holds the name now and is to be told (name_free).
func (n *Queues) Release(full string, uid types.UID, gone func(types.UID) bool) (next types.UID, ok bool) {
	q := n.q[full]
	head := len(q) > 0 && q[0] == uid
	if i := slices.Index(q, uid); i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	for len(q) > 0 && gone(q[0]) {
		q = q[1:]
	}
	if len(q) == 0 {
		delete(n.q, full)
		return "", false
	}
	n.q[full] = q
	if head {
		return q[0], true
	}
	return "", false
}
