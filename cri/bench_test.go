package cri_test

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/floor"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/cri/sim"
)

// floorSizes are the burst sizes of BenchmarkFloor.
var floorSizes = []int{30, 100}

// BenchmarkFloor is the floor the engine is measured against: a direct CRI
// client starts N host-network pods (RunPodSandbox + CreateContainer +
// StartContainer, image already present) with unlimited parallelism, waits
// until ListContainers shows all N RUNNING, then removes them (StopContainer
// with a 1 s grace, StopPodSandbox, RemovePodSandbox) until ListPodSandbox
// shows none. Each iteration is one whole burst; run it with -benchtime=1x.
//
// Metrics: start-all-s (burst start to all RUNNING), start-p50-s and
// start-p99-s (burst start to each pod's StartContainer return), remove-all-s
// (removal start to no sandbox left), stop-retries (StopContainer errors per
// burst on containers that had stopped anyway or stopped on a second call).
func BenchmarkFloor(b *testing.B) {
	b.Run("containerd", func(b *testing.B) {
		h := harness.ForTest(b)
		rt := dialFloor(b, h.Endpoint)
		for _, n := range floorSizes {
			b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
				benchBurst(b, rt, h.ImageRef(harness.BusyboxRepo), n)
			})
		}
	})
	b.Run("sim", func(b *testing.B) {
		const image = "busybox:latest"
		srv, err := sim.Start(b.TempDir(), sim.Options{Images: []string{image}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(srv.Stop)
		// Like busybox sleep under containerd, the process ignores SIGTERM
		// and is killed when the grace period ends.
		srv.Runtime.OnContainer(sim.Match{}, sim.Behavior{Term: sim.TermIgnored})
		rt := dialFloor(b, srv.Endpoint)
		for _, n := range floorSizes {
			b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
				benchBurst(b, rt, image, n)
			})
		}
	})
}

func dialFloor(b *testing.B, endpoint string) *cri.Client {
	b.Helper()
	rt, err := cri.Dial(context.Background(), endpoint)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	if _, err := rt.Version(context.Background()); err != nil {
		b.Fatal(err)
	}
	return rt
}

func benchBurst(b *testing.B, rt cri.Runtime, image string, n int) {
	var (
		podStarts           []float64
		startAll, removeAll float64
		stopRetries         int
	)
	for i := 0; i < b.N; i++ {
		r, err := floor.Burst(context.Background(), rt, image, n, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range r.PodStart {
			podStarts = append(podStarts, d.Seconds())
		}
		startAll += r.StartAll.Seconds()
		removeAll += r.RemoveAll.Seconds()
		stopRetries += r.StopRetries
	}
	sort.Float64s(podStarts)
	b.ReportMetric(startAll/float64(b.N), "start-all-s")
	b.ReportMetric(floor.Percentile(podStarts, 0.50), "start-p50-s")
	b.ReportMetric(floor.Percentile(podStarts, 0.99), "start-p99-s")
	b.ReportMetric(removeAll/float64(b.N), "remove-all-s")
	b.ReportMetric(float64(stopRetries)/float64(b.N), "stop-retries")
}
