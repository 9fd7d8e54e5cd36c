// Package inbox is a pod worker's input queue: inputs are posted from any
// goroutine (the sync loop, the PLEG, probes, the eviction manager, another
// worker) and taken in order, in batches, by the worker's goroutine alone.
//
// The rules kubelet's pod workers keep for UpdatePod:
//   - Config inputs coalesce: only the newest pending pod spec counts and it
//     is taken first. A pending kill (REMOVE, DELETE) is never replaced by a
//     later non-kill: the worker has seen termination. A status-only change
//     (RECONCILE) after a pending ADD or UPDATE keeps that op, whose spec
//     change still has to be applied, with the newest pod.
//   - The first kill, or one with a shorter grace period than the kills
//     posted before, cancels the actions the worker is running (a slow pull
//     or start, a stop with a longer grace period): the kill comes first. So
//     does an eviction.
//   - A sync input (a machine timer ran out) waits in the queue once.
//   - An orphan stop (a runtime pod no source declares) counts as a kill.
//
// Its state describes the queue, never a machine: whether a kill was posted
// (housekeeping keeps a completed pod its source still lists unless it was
// killed) and whether the pod is an orphan.
package inbox

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/config"
)

// Kind is where an input came from.
type Kind uint8

const (
	Config   Kind = iota // a config update (Op and the newest Pod)
	PLEG                 // a runtime container event
	Sync                 // a machine timer ran out (found by the sync tick)
	Probe                // a probe result
	Orphan               // a runtime pod no source declares (Pod: its stand-in)
	NameFree             // the static pod name the worker waits for is free
	Evict                // the eviction manager evicts the pod
)

// Input is one message to a pod worker; P is what else it carries.
type Input[P any] struct {
	Kind Kind
	Op   config.Op // of a Config input
	Pod  *v1.Pod   // of a Config or Orphan input
	P    P
}

// IsKill reports an op that kills the pod: REMOVE or DELETE.
func IsKill(op config.Op) bool { return op == config.OpRemove || op == config.OpDelete }

// Inbox is one worker's queue. It is safe for concurrent use.
type Inbox[P any] struct {
	grace func(*v1.Pod) int64 // a kill's grace period, from its pod

	mu         sync.Mutex
	cfg        *Input[P] // the newest pending config input (coalesced)
	queue      []Input[P]
	cancel     context.CancelFunc // cancels the running actions
	killGrace  int64              // the shortest grace period of the kills posted
	killPosted bool
	orphan     bool
	syncQueued bool
	stopped    bool
	wake       chan struct{}
}

// New returns an empty inbox whose kills have the grace period grace
// gives of their pod.
func New[P any](grace func(*v1.Pod) int64) *Inbox[P] {
	return &Inbox[P]{grace: grace, wake: make(chan struct{}, 1)}
}

// Wake receives when inputs may wait, or the inbox was stopped.
func (b *Inbox[P]) Wake() <-chan struct{} { return b.wake }

func (b *Inbox[P]) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Post queues in by the rules above; a stopped inbox drops it.
func (b *Inbox[P]) Post(in Input[P]) {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	switch in.Kind {
	case Config:
		switch {
		case b.cfg != nil && IsKill(b.cfg.Op) && !IsKill(in.Op):
		case b.cfg != nil && in.Op == config.OpReconcile && b.cfg.Op != config.OpReconcile:
			b.cfg.Pod = in.Pod
		default:
			c := in
			b.cfg = &c
		}
		if IsKill(in.Op) {
			g := b.grace(in.Pod)
			if !b.killPosted || g < b.killGrace {
				b.cancelRunning()
				b.killGrace = g
			}
			b.killPosted = true
		}
	case Sync:
		if b.syncQueued {
			b.mu.Unlock()
			return
		}
		b.syncQueued = true
		b.queue = append(b.queue, in)
	case Orphan:
		b.killPosted, b.orphan = true, true
		b.queue = append(b.queue, in)
	case Evict:
		b.cancelRunning()
		b.queue = append(b.queue, in)
	default:
		b.queue = append(b.queue, in)
	}
	b.mu.Unlock()
	b.signal()
}

// cancelRunning cancels the actions the worker runs, if any. b.mu is held.
func (b *Inbox[P]) cancelRunning() {
	if b.cancel != nil {
		b.cancel()
	}
}

// Take returns the queued inputs, the coalesced config input first, and a
// context under ctx for the actions they trigger, which a kill or an
// eviction posted from now on cancels. ok is false once the inbox is
// stopped: nothing is returned and nothing is kept.
func (b *Inbox[P]) Take(ctx context.Context) (ins []Input[P], actx context.Context, cancel context.CancelFunc, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		b.queue, b.cfg = nil, nil
		return nil, nil, nil, false
	}
	// The queue's array goes with the inputs taken: an idle worker keeps
	// no queue (an input is about 150 bytes), and the next post makes one.
	if b.cfg != nil {
		ins = append(make([]Input[P], 0, 1+len(b.queue)), *b.cfg)
		ins = append(ins, b.queue...)
		b.cfg = nil
	} else {
		ins = b.queue
	}
	b.queue = nil
	b.syncQueued = false
	actx, cancel = context.WithCancel(ctx)
	b.cancel = cancel
	return ins, actx, cancel, true
}

// PutBack puts the inputs a cancelled batch did not handle before those
// posted since, and wakes the worker to take them with a fresh context.
func (b *Inbox[P]) PutBack(rest []Input[P]) {
	b.mu.Lock()
	b.queue = append(append([]Input[P](nil), rest...), b.queue...)
	b.cancel = nil
	b.mu.Unlock()
	b.signal()
}

// Stop makes the inbox drop what it holds and every later post, and wakes
// the worker, whose next Take reports it stopped.
func (b *Inbox[P]) Stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.signal()
}

// Len is the number of inputs waiting to be taken (a coalesced config
// input counts once).
func (b *Inbox[P]) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.queue)
	if b.cfg != nil {
		n++
	}
	return n
}

// Stopped reports whether Stop was called.
func (b *Inbox[P]) Stopped() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopped
}

// KillPosted reports whether a kill (config REMOVE or DELETE, an orphan
// stop) was ever posted.
func (b *Inbox[P]) KillPosted() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.killPosted
}

// Orphan reports whether the pod is a runtime pod no source declares,
// being stopped.
func (b *Inbox[P]) Orphan() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.orphan
}
