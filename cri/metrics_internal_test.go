package cri

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkMetricsInterceptor measures what the metrics' unary interceptor
// adds to a call (the call itself is a no-op invoker).
func BenchmarkMetricsInterceptor(b *testing.B) {
	var o options
	WithMetrics(prometheus.NewRegistry())(&o)
	unary := o.unary[0]
	ctx := context.Background()
	req, reply := &runtimeapi.ContainerStatusRequest{ContainerId: "c"}, &runtimeapi.ContainerStatusResponse{}
	invoke := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		_ = unary(ctx, "/runtime.v1.RuntimeService/ContainerStatus", req, reply, nil, invoke)
	}
}
