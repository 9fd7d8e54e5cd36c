package engine

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// backoff hands out per-key delays that start at base, double on every
// failure and cap at max, like kubelet's flowcontrol.Backoff. A key whose last
// failure is older than resetAfter starts again at base (kubelet: a container
// that ran 10 minutes without failing loses its CrashLoopBackOff).
//
// It is safe for concurrent use; keys are per container (pod UID + container
// name + spec hash), so pods never share a delay.
type backoff struct {
	clock      clock.PassiveClock
	base, max  time.Duration
	resetAfter time.Duration

	mu      sync.Mutex
	entries map[string]backoffEntry
}

type backoffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
}

func newBackoff(c clock.PassiveClock, base, max, resetAfter time.Duration) *backoff {
	if max < base {
		max = base
	}
	return &backoff{clock: c, base: base, max: max, resetAfter: resetAfter, entries: map[string]backoffEntry{}}
}

// Next records a failure for key and returns the delay to wait before the next
// attempt: base the first time (or after resetAfter without failures), then
// double the previous delay, at most max.
func (b *backoff) Next(key string) time.Duration {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	switch {
	case !ok || now.Sub(e.lastUpdate) > b.resetAfter:
		e.delay = b.base
	default:
		e.delay *= 2
		if e.delay > b.max {
			e.delay = b.max
		}
	}
	e.lastUpdate = now
	b.entries[key] = e
	return e.delay
}

// Peek returns the delay Next would hand out for key now, without recording
// a failure.
func (b *backoff) Peek(key string) time.Duration {
	if d := b.Current(key); d > 0 {
		return min(2*d, b.max)
	}
	return b.base
}

// Current returns the delay Next last handed out for key, or 0 (also once
// resetAfter passed without a failure).
func (b *backoff) Current(key string) time.Duration {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || now.Sub(e.lastUpdate) > b.resetAfter {
		return 0
	}
	return e.delay
}

// Reset forgets key.
func (b *backoff) Reset(key string) {
	b.mu.Lock()
	delete(b.entries, key)
	b.mu.Unlock()
}

// GC forgets keys whose last failure is older than resetAfter; the
// housekeeping tick calls it so the table does not grow with dead pods.
func (b *backoff) GC() {
	now := b.clock.Now()
	b.mu.Lock()
	for k, e := range b.entries {
		if now.Sub(e.lastUpdate) > b.resetAfter {
			delete(b.entries, k)
		}
	}
	b.mu.Unlock()
}
