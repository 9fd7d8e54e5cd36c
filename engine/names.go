package engine

import (
	"k8s.io/apimachinery/pkg/types"
)

// Static pod full names (name_namespace): at most one started pod per full
// name; successors wait FIFO. The sync loop queues a UID under its full name
// when it creates the UID's worker (queueName); guard name_taken reads the
// queue (nameTaken); action release_name leaves it (releaseName) and hands
// the name to the next UID still waiting, which gets a name_free input.

// queueName appends uid to the queue of full unless it is in it already.
// The caller holds e.mu.
func (e *Engine) queueNameLocked(full string, uid types.UID) {
	for _, u := range e.names[full] {
		if u == uid {
			return
		}
	}
	e.names[full] = append(e.names[full], uid)
}

// nameTaken reports whether another UID holds full or waits for it ahead of
// uid. A UID that is not queued does not take part (not a static pod).
func (e *Engine) nameTaken(full string, uid types.UID) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	q := e.names[full]
	return len(q) > 0 && q[0] != uid && queued(q, uid)
}

func queued(q []types.UID, uid types.UID) bool {
	for _, u := range q {
		if u == uid {
			return true
		}
	}
	return false
}

// releaseName removes uid from the queue of full. When uid held the name,
// the next UID whose worker is still alive gets name_free.
func (e *Engine) releaseName(full string, uid types.UID) {
	e.mu.Lock()
	q := e.names[full]
	head := len(q) > 0 && q[0] == uid
	for i, u := range q {
		if u == uid {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	// UIDs whose worker is gone (purged) never ask again: skip them. A UID
	// adopted from the runtime keeps its place until its worker exists.
	for len(q) > 0 && e.workers[q[0]] == nil && e.adopted[q[0]] == nil {
		q = q[1:]
	}
	var next *podWorker
	if head && len(q) > 0 {
		next = e.workers[q[0]]
	}
	if len(q) == 0 {
		delete(e.names, full)
	} else {
		e.names[full] = q
	}
	e.mu.Unlock()
	if next != nil {
		next.post(input{kind: inputNameFree})
	}
}
