// Package prober is the arithmetic of kubelet's probe workers
// (pkg/kubelet/prober, v1.34), apart from running a probe (engine/handlers)
// and from the probe machine that decides what a result means
// (spec/probe.hcl, engine/probes): the probe kinds, the API
// defaults of a v1.Probe, the ticks a worker probes on, the run of equal
// raw results counted against the thresholds, and the input of
// spec/routes.hcl a thresholded result is. It is pure.
package prober

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/schedule"
	"github.com/speclet/speclet/fsm"
)

// Kind names a probe of a container.
type Kind uint8

const (
	Liveness Kind = iota
	Readiness
	Startup
)

// Kinds is the number of probe kinds.
const Kinds = 3

var kindNames = [Kinds]string{"liveness", "readiness", "startup"}

func (k Kind) String() string { return kindNames[k] }

// ParseKind returns the kind named s ("liveness", "readiness", "startup").
func ParseKind(s string) (Kind, bool) {
	for i, n := range kindNames {
		if n == s {
			return Kind(i), true
		}
	}
	return 0, false
}

// Of is the container's probe of kind k; nil when it has none (or no spec).
func Of(c *v1.Container, k Kind) *v1.Probe {
	if c == nil {
		return nil
	}
	switch k {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	default:
		return c.StartupProbe
	}
}

// kubelet's probe defaults (API defaulting of v1.Probe).
const (
	defaultPeriod           = 10
	defaultTimeout          = 1
	defaultSuccessThreshold = 1
	defaultFailureThreshold = 3
)

// Period is the probe's periodSeconds, 10 s when unset.
func Period(p *v1.Probe) time.Duration { return seconds(p.PeriodSeconds, defaultPeriod) }

// Timeout is the probe's timeoutSeconds, 1 s when unset.
func Timeout(p *v1.Probe) time.Duration { return seconds(p.TimeoutSeconds, defaultTimeout) }

func seconds(s, def int32) time.Duration {
	if s <= 0 {
		s = def
	}
	return time.Duration(s) * time.Second
}

// InitialDelayEnd is when an instance started at start is past the probe's
// initialDelaySeconds. kubelet compares int32(seconds since start) with it:
// whole seconds, so a tick probes at or after this instant.
func InitialDelayEnd(p *v1.Probe, start time.Time) time.Time {
	return start.Add(time.Duration(p.InitialDelaySeconds) * time.Second)
}

// FirstProbe is the first tick of a kind anchored at anchor on which a
// worker that starts at now probes: after now (the tick at this very
// instant is the one that found the container not running yet) and at or
// after the instance's start plus initialDelaySeconds.
func FirstProbe(p *v1.Probe, anchor, now, start time.Time) time.Time {
	period := Period(p)
	return later(schedule.TickAfter(anchor, period, now), schedule.TickAtOrAfter(anchor, period, InitialDelayEnd(p, start)))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Result is a raw or thresholded result: unknown, success, failure.
type Result int8

const (
	Unknown Result = iota
	Success
	Failure
)

// Run is a worker's run of equal raw results (kubelet's resultRun). The
// zero value has seen none.
type Run struct {
	last Result
	n    int
}

// Add counts a raw result and reports the result the run now stands for
// once it is as long as the probe's threshold for it (successThreshold,
// default 1; failureThreshold, default 3); Unknown while shorter.
func (r *Run) Add(p *v1.Probe, success bool) Result {
	res := Failure
	if success {
		res = Success
	}
	if r.last == res {
		r.n++
	} else {
		r.last, r.n = res, 1
	}
	thr := p.FailureThreshold
	if thr <= 0 {
		thr = defaultFailureThreshold
	}
	if success {
		thr = p.SuccessThreshold
		if thr <= 0 {
			thr = defaultSuccessThreshold
		}
	}
	if int32(r.n) < thr {
		return Unknown
	}
	return res
}

// Input is the input of spec/routes.hcl for a thresholded result of kind k;
// false for none (a liveness success changes nothing).
func Input(k Kind, success bool) (fsm.Input, bool) {
	switch {
	case k == Liveness && !success:
		return fsm.InputLivenessFailed, true
	case k == Startup && success:
		return fsm.InputStartupSucceeded, true
	case k == Startup:
		return fsm.InputStartupFailed, true
	case k == Readiness && success:
		return fsm.InputReadinessSucceeded, true
	case k == Readiness:
		return fsm.InputReadinessFailed, true
	}
	return 0, false
}
