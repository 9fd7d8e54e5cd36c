package containerdtest

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
)

// TestEventStream: the PLEG follows what the runtime offers. containerd 1.6
// refuses GetContainerEvents, so the relist stays at 1 s (one refused
// stream, the evented gauge 0). containerd 2.x streams: on an idle node the
// stream comes up without any event and the relist slows to its safety-net
// period; when containerd restarts the stream breaks, the node relists at
// once and every second, and the stream comes back; a container's exit is
// still reported afterwards.
func TestEventStream(t *testing.T) {
	c, ctx := containerdFor(t, 3*time.Minute)
	reg := prometheus.NewRegistry()
	_, e, updates := startEngine(ctx, t, c, engine.Config{Registerer: reg})
	value := func(name string) float64 { return gathered(t, reg, name) }
	waitMetric := func(what string, ok func() bool) {
		t.Helper()
		waitFor(t, ctx, what, ok, e)
	}

	if c.Runtime != harness.Containerd2 {
		waitMetric("the runtime refusing the event stream", func() bool {
			return value("speclet_evented_pleg_connection_error_count") == 1
		})
		if up, evented := value("speclet_evented_pleg_connection_success_count"), value("speclet_pleg_evented"); up != 0 || evented != 0 {
			t.Fatalf("%s: stream came up %v times, evented gauge %v; want 0 and 0 (the runtime has no event stream)", c.Runtime, up, evented)
		}
		return
	}

	waitMetric("the event stream up on an idle node", func() bool { return value("speclet_pleg_evented") == 1 })
	// The relist is a safety net now (every 10 s): at most one more in 5 s.
	n0 := value("speclet_pleg_relist_interval_seconds")
	time.Sleep(5 * time.Second)
	if n := value("speclet_pleg_relist_interval_seconds"); n > n0+1 {
		t.Fatalf("relists in 5 s with the stream up: %v, want at most 1 (relist period %v)", n-n0, 10*time.Second)
	}

	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	waitMetric("the broken stream counted", func() bool { return value("speclet_evented_pleg_connection_error_count") >= 1 })
	waitMetric("the stream back after the restart", func() bool {
		return value("speclet_evented_pleg_connection_success_count") >= 2 && value("speclet_pleg_evented") == 1
	})

	pod := shPod(c, "streamed", v1.RestartPolicyNever, 2, "sleep 1; exit 3")
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{pod}, Source: config.SourceFile}
	waitPhase(t, ctx, e, "streamed", v1.PodFailed)
	if st := mainStatus(e, "streamed"); st.State.Terminated == nil || st.State.Terminated.ExitCode != 3 {
		t.Fatalf("container main: %+v, want terminated with exit code 3", st.State)
	}
}

// gathered is the value of the counter or gauge name in reg (summed over
// its series), or a histogram's sample count; 0 when it has no series.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				v += m.Counter.GetValue()
			case m.Gauge != nil:
				v += m.Gauge.GetValue()
			case m.Histogram != nil:
				v += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return v
}
