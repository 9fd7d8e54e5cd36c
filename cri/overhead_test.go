package cri_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
)

// BenchmarkMetricsOverhead measures one ContainerStatus call on the
// simulated runtime over gRPC, by a client without interceptors and by one
// dialed WithMetrics.
func BenchmarkMetricsOverhead(b *testing.B) {
	srv := simServerB(b)
	bg := context.Background()
	plain := dial(b, srv.Endpoint)
	sb, err := plain.RunPodSandbox(bg, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "n", Uid: "u"}}, "")
	if err != nil {
		b.Fatal(err)
	}
	id, err := plain.CreateContainer(bg, sb, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox:latest"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		rt   cri.Full
	}{
		{"plain", plain},
		{"metered", dial(b, srv.Endpoint, cri.WithMetrics(prometheus.NewRegistry()))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tc.rt.ContainerStatus(bg, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func simServerB(b *testing.B) *sim.Server {
	srv, err := sim.Start(b.TempDir(), sim.Options{Images: []string{"busybox:latest"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	return srv
}
