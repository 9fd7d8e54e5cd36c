package worker

import (
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Backoff is kubelet's flowcontrol.Backoff on the engine's clock: per-key
// delays that start at base, double on every failure and cap at max. A key
// whose last failure is older than resetAfter starts again at base (kubelet's
// crash loop back-off: a container that ran 10 minutes without failing
// loses its CrashLoopBackOff).
//
// It is safe for concurrent use; keys are per container (pod UID + container
// name + spec hash), so pods never share a delay. On top of
// flowcontrol.Backoff it adds the two reads the container machine's
// durations need without recording a failure: Current and Peek.
type Backoff struct {
	fc        *flowcontrol.Backoff
	base, max time.Duration
}

func NewBackoff(c clock.Clock, base, maxDelay, resetAfter time.Duration) *Backoff {
	maxDelay = max(maxDelay, base)
	fc := flowcontrol.NewBackOff(base, maxDelay) // no jitter, as kubelet's
	fc.Clock = c
	fc.HasExpiredFunc = func(eventTime, lastUpdate time.Time, _ time.Duration) bool {
		return eventTime.Sub(lastUpdate) > resetAfter
	}
	return &Backoff{fc: fc, base: base, max: maxDelay}
}

// Next records a failure for key and returns the delay to wait before the next
// attempt: base the first time (or after resetAfter without failures), then
// double the previous delay, at most max.
func (b *Backoff) Next(key string) time.Duration {
	b.fc.Next(key, b.fc.Clock.Now())
	return b.fc.Get(key)
}

// Peek returns the delay Next would hand out for key now, without recording
// a failure.
func (b *Backoff) Peek(key string) time.Duration {
	if d := b.Current(key); d > 0 {
		return min(2*d, b.max)
	}
	return b.base
}

// Current returns the delay Next last handed out for key, or 0 (also once
// resetAfter passed without a failure).
func (b *Backoff) Current(key string) time.Duration {
	// in back-off since now: the key has an entry that has not expired
	// (and a delay above the clock's Since(now), 0 or a few nanoseconds)
	if !b.fc.IsInBackOffSince(key, b.fc.Clock.Now()) {
		return 0
	}
	return b.fc.Get(key)
}

// Reset forgets key.
func (b *Backoff) Reset(key string) { b.fc.Reset(key) }

// GC forgets keys whose last failure is older than resetAfter; the
// housekeeping tick calls it so the table does not grow with dead pods.
func (b *Backoff) GC() { b.fc.GC() }
