package probes

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/prober"
	"github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// The ticks of a probe kind (kubelet's prober worker.go run and doProbe).
// kubelet makes one worker per container and probe kind when the pod is
// added to the prober (AddPod, in each sync, after the volumes mounted and
// before the containers start) and keeps it until the pod is removed: its
// ticker has the probe's period, its phase is the worker's start, after a
// sleep of a random part of the period when the kubelet started less than
// one period before; doProbe runs at the start and at every tick and skips
// while the container does not run, within initialDelaySeconds of its start
// (int32(seconds since) < initialDelaySeconds: whole seconds, so a tick
// probes at or after start + initialDelaySeconds), before the startup probe
// succeeded (liveness, readiness) and after a kill until a new container.
// Here the kind's anchor (Workers.ticks) is that phase, set by Add at the
// pod's first sync that mounted its volumes and kept across the
// container's instances; a worker of an instance probes on the anchor's
// ticks that come after its start (firstProbe). The manual trigger of the
// readiness worker (TriggerReadiness) moves its anchor to now, as kubelet's
// ticker Reset.

// NextProbe is the duration next_probe: until the earliest next probe of
// the running workers, 0 when one is due already, negative (no timer) when
// none runs.
func (p *Workers) NextProbe() time.Duration {
	var first time.Time
	for _, w := range p.workers {
		if w != nil && (first.IsZero() || w.next.Before(first)) {
			first = w.next
		}
	}
	if first.IsZero() {
		return -1
	}
	return max(first.Sub(p.c.Now()), 0)
}

// Add anchors the ticks of every probe kind of the container that has
// none yet: kubelet's AddPod, which SyncPod calls once the volumes
// mounted; a later sync anchors only a probe that a spec update added.
func (p *Workers) Add() {
	for k := range p.ticks {
		if spec := p.spec(prober.Kind(k)); spec != nil {
			p.anchor(prober.Kind(k), spec)
		}
	}
}

// anchor returns the anchor of kind k's ticks, setting it to now plus the
// jitter when the pod was not added yet (a container adopted running
// after a restart of the engine starts its probes before the pod's first
// sync).
func (p *Workers) anchor(k prober.Kind, spec *v1.Probe) time.Time {
	if p.ticks[k].IsZero() {
		p.ticks[k] = p.c.Now().Add(p.c.Jitter(prober.Period(spec)))
	}
	return p.ticks[k]
}

// firstProbe is the first tick of kind k on which a worker that starts now
// probes: after now (the tick at this very instant is the one that found
// the container not running yet, or not started) and at or after the
// container's start plus initialDelaySeconds.
func (p *Workers) firstProbe(k prober.Kind, spec *v1.Probe) time.Time {
	return prober.FirstProbe(spec, p.anchor(k, spec), p.c.Now(), p.c.StartedAt())
}

// TriggerReadiness is kubelet's manual trigger of the readiness worker
// (prober_manager.go UpdatePodStatus, in the sync that finds the container
// started and running and its readiness not success): the worker probes at
// once, unless the instance is within its initial delay or the worker's
// previous probe still runs, and its ticks restart from now (the ticker's
// Reset). A worker still waiting for its first tick after the jitter takes
// the trigger there (kubelet's worker reads its trigger channel only after
// its first doProbe).
func (p *Workers) TriggerReadiness() op.Op {
	w := p.workers[prober.Readiness]
	if w == nil {
		return op.Done(nil)
	}
	now := p.c.Now()
	if p.ticks[prober.Readiness].After(now) {
		return op.Done(nil)
	}
	p.ticks[prober.Readiness] = now
	period := prober.Period(w.spec)
	if end := prober.InitialDelayEnd(w.spec, p.c.StartedAt()); now.Before(end) {
		w.next = schedule.TickAtOrAfter(now, period, end)
		return op.Done(nil)
	}
	if !w.inFlight {
		p.probe(w, fsm.ProbeActionTriggerReadiness)
	}
	w.next = now.Add(period)
	return op.Done(nil)
}
