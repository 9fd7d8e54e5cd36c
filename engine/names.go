package engine

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/inbox"
	"github.com/speclet/speclet/engine/worker"
)

// Static pod full names (engine/names): the sync loop queues a UID under its
// full name when it creates the UID's worker, and restart recovery a UID it
// found running; guard name_taken reads the queue (nameTaken); action
// release_name leaves it (releaseName) and hands the name to the next UID,
// whose worker gets a name_free input.

// nameTaken reports whether another UID holds full or waits for it ahead of
// uid.
func (e *Engine) nameTaken(full string, uid types.UID) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.names.Taken(full, uid)
}

// releaseName removes uid from the queue of full. When uid held the name,
// the next UID whose worker is alive gets name_free. UIDs whose worker is
// gone (purged) never ask again and are skipped; a UID adopted from the
// runtime keeps its place until its worker exists.
func (e *Engine) releaseName(full string, uid types.UID) {
	e.mu.Lock()
	next, ok := e.names.Release(full, uid, func(u types.UID) bool { return e.workers[u] == nil && e.adopted[u] == nil })
	var w *worker.Worker
	if ok {
		w = e.workers[next]
	}
	e.mu.Unlock()
	if w != nil {
		w.Post(worker.Input{Kind: inbox.NameFree})
	}
}
