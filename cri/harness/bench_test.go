package harness

import (
	"context"
	"testing"
	"time"
)

// BenchmarkStartStop measures what one ForTest costs a test: start-s from
// StartContainerd (registry, images pushed and pulled) to ready, stop-s for
// Stop with no pod left to remove.
func BenchmarkStartStop(b *testing.B) {
	requireRoot(b)
	if err := EnsurePackages(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	var start, stop time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		c, err := StartContainerd(context.Background(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := c.Stop(); err != nil {
			b.Fatal(err)
		}
		start += t1.Sub(t0)
		stop += time.Since(t1)
	}
	b.ReportMetric(start.Seconds()/float64(b.N), "start-s")
	b.ReportMetric(stop.Seconds()/float64(b.N), "stop-s")
}
