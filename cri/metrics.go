package cri

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// Metric names recorded by WithMetrics.
const (
	MetricOperationsDuration = "speclet_runtime_operations_duration_seconds"
	MetricOperationsErrors   = "speclet_runtime_operations_errors_total"
)

type metrics struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

// WithMetrics makes the client record, for every gRPC call, its duration in
// speclet_runtime_operations_duration_seconds{operation_type} and its
// failures in speclet_runtime_operations_errors_total{operation_type}, where
// operation_type is the CRI method name ("StartContainer"). It installs a
// pair of gRPC client interceptors (WithInterceptors). The collectors are
// registered on reg; when reg already has them (a second client metered on
// the same registry) they are shared. Any other registration failure is a
// programming error and panics.
//
// GetContainerEvents is a stream: its duration is the life of the stream and
// an error is counted when the stream breaks (not when its context ends).
// A list call split by sandbox (see splitter) is counted per gRPC call: the
// whole call that was over the message limit as an error, then the
// ListPodSandbox and each sandbox's call.
func WithMetrics(reg prometheus.Registerer) Option {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricOperationsDuration,
			Help:    "Duration in seconds of container runtime (CRI) calls, by CRI method.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 14),
		}, []string{"operation_type"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricOperationsErrors,
			Help: "Number of failed container runtime (CRI) calls, by CRI method.",
		}, []string{"operation_type"}),
	}
	m.duration = register(reg, m.duration)
	m.errors = register(reg, m.errors)
	return WithInterceptors(m.unary, m.stream)
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic("cri: register runtime metrics: " + err.Error())
	}
	return c
}

func (m *metrics) record(op string, start time.Time, err error) {
	m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		m.errors.WithLabelValues(op).Inc()
	}
}

func (m *metrics) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	m.record(Method(method), start, err)
	return err
}

// stream records a stream once: when a receive fails while its context is
// live (the stream broke: an error) or when its context ends (no error).
func (m *metrics) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	op, start := Method(method), time.Now()
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		if ctx.Err() != nil {
			err = nil
		}
		m.record(op, start, err)
		return nil, err
	}
	ms := &meteredStream{ClientStream: s}
	ms.stop = context.AfterFunc(ctx, func() { m.record(op, start, nil) })
	ms.end = func(err error) {
		if ctx.Err() != nil {
			err = nil
		}
		m.record(op, start, err)
	}
	return ms, nil
}

type meteredStream struct {
	grpc.ClientStream
	stop func() bool
	end  func(error)
}

func (s *meteredStream) RecvMsg(msg any) error {
	err := s.ClientStream.RecvMsg(msg)
	if err != nil && s.stop() {
		s.end(err)
	}
	return err
}
