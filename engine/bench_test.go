package engine

import (
	"context"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/internal/suite"
	"github.com/speclet/speclet/engine/pleg"
	"github.com/speclet/speclet/engine/runtimepods"
)

// benchPod is pod i of the benchmarks (suite.Pod).
func benchPod(i int) *v1.Pod { return suite.Pod(i) }

// BenchmarkRelist measures one PLEG relist against the simulated runtime
// holding N running pods (ListContainers over gRPC plus the diff).
func BenchmarkRelist(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run("pods="+strconv.Itoa(n), func(b *testing.B) {
			_, rt := startSim(b)
			ctx := context.Background()
			for i := 0; i < n; i++ {
				id := createContainer(b, rt, benchPod(i))
				if err := rt.StartContainer(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			p := pleg.New(rt, clock.RealClock{}, runtimepods.Identify)
			if _, err := p.Relist(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := p.Relist(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEventToStatus measures how long after a container dies in the
// runtime its pod's published status shows it no longer running, with 1,000
// pods on the simulated runtime (its event stream feeds the PLEG). One op is
// one container killed behind the engine's back and seen in the status.
func BenchmarkEventToStatus(b *testing.B) {
	const n = 1000
	_, rt := startSim(b)
	e, updates, stop := runBenchEngine(b, Config{Runtime: rt})
	defer stop()
	ctx := context.Background()
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = benchPod(i)
	}
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: pods, Source: config.SourceFile}
	for e.countRunning() < n {
		time.Sleep(20 * time.Millisecond)
	}
	cs, err := rt.ListContainers(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	if len(cs) < b.N {
		b.Skipf("only %d containers to kill for b.N=%d; use -benchtime=%dx or less", len(cs), b.N, len(cs))
	}
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c := cs[i]
		w := e.worker(types.UID(c.Labels[LabelPodUID]), false, nil)
		t0 := time.Now()
		if err := rt.StopContainer(ctx, c.Id, 0); err != nil {
			b.Fatal(err)
		}
		for {
			p := w.Snapshot()
			if st := p.Status.ContainerStatuses; len(st) == 1 && st[0].State.Running == nil {
				break
			}
			time.Sleep(50 * time.Microsecond)
		}
		total += time.Since(t0)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/event")
}

// nopRuntime satisfies cri.Runtime for engines that never call it.
type nopRuntime struct{ cri.Runtime }
