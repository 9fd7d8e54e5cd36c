package engine

import (
	"github.com/speclet/speclet/engine/prober"
	"github.com/speclet/speclet/engine/probes"
)

// A container's probes run in its pod worker (engine/worker, engine/probes);
// the engine's API names their kinds and results.

// ProbeKind names a probe of a container (engine/prober).
type ProbeKind = prober.Kind

const (
	ProbeLiveness  = prober.Liveness
	ProbeReadiness = prober.Readiness
	ProbeStartup   = prober.Startup
)

// ParseProbeKind returns the kind named s ("liveness", "readiness", "startup").
func ParseProbeKind(s string) (ProbeKind, bool) { return prober.ParseKind(s) }

// ProbeResult is one probe outcome for a container of a pod: a raw result
// of one of the engine's probe workers, counted against the probe's
// thresholds, or, with no worker (Worker 0: the engine's script tests
// deliver such to handleProbe), a thresholded result routed as is.
type ProbeResult = probes.Report
