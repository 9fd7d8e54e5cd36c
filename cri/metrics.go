package cri

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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

// WithMetrics returns r recording, for every call, its duration in
// speclet_runtime_operations_duration_seconds{operation_type} and its
// failures in speclet_runtime_operations_errors_total{operation_type}, where
// operation_type is the CRI method name ("StartContainer"). The collectors
// are registered on reg; when reg already has them (a second WithMetrics on
// the same registry) they are shared. Any other registration failure is a
// programming error and panics.
//
// GetContainerEvents is a stream: its duration is the life of the stream and
// an error is counted when the stream breaks.
func WithMetrics(r Full, reg prometheus.Registerer) Full {
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
	return &metered{r: r, m: m}
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

type metered struct {
	r Full
	m *metrics
}

func (x *metered) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	start := time.Now()
	v, err := x.r.Version(ctx)
	x.m.record("Version", start, err)
	return v, err
}

func (x *metered) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	start := time.Now()
	s, err := x.r.Status(ctx, verbose)
	x.m.record("Status", start, err)
	return s, err
}

func (x *metered) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	start := time.Now()
	id, err := x.r.RunPodSandbox(ctx, config, runtimeHandler)
	x.m.record("RunPodSandbox", start, err)
	return id, err
}

func (x *metered) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	start := time.Now()
	err := x.r.StopPodSandbox(ctx, podSandboxID)
	x.m.record("StopPodSandbox", start, err)
	return err
}

func (x *metered) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	start := time.Now()
	err := x.r.RemovePodSandbox(ctx, podSandboxID)
	x.m.record("RemovePodSandbox", start, err)
	return err
}

func (x *metered) PodSandboxStatus(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStatus, error) {
	start := time.Now()
	s, err := x.r.PodSandboxStatus(ctx, podSandboxID)
	x.m.record("PodSandboxStatus", start, err)
	return s, err
}

func (x *metered) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	start := time.Now()
	l, err := x.r.ListPodSandbox(ctx, filter)
	x.m.record("ListPodSandbox", start, err)
	return l, err
}

func (x *metered) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	start := time.Now()
	id, err := x.r.CreateContainer(ctx, podSandboxID, config, sandboxConfig)
	x.m.record("CreateContainer", start, err)
	return id, err
}

func (x *metered) StartContainer(ctx context.Context, containerID string) error {
	start := time.Now()
	err := x.r.StartContainer(ctx, containerID)
	x.m.record("StartContainer", start, err)
	return err
}

func (x *metered) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	start := time.Now()
	err := x.r.StopContainer(ctx, containerID, timeout)
	x.m.record("StopContainer", start, err)
	return err
}

func (x *metered) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (ExecResult, error) {
	start := time.Now()
	r, err := x.r.ExecSync(ctx, containerID, cmd, timeout)
	x.m.record("ExecSync", start, err)
	return r, err
}

func (x *metered) RemoveContainer(ctx context.Context, containerID string) error {
	start := time.Now()
	err := x.r.RemoveContainer(ctx, containerID)
	x.m.record("RemoveContainer", start, err)
	return err
}

func (x *metered) ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error) {
	start := time.Now()
	s, err := x.r.ContainerStatus(ctx, containerID)
	x.m.record("ContainerStatus", start, err)
	return s, err
}

func (x *metered) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	start := time.Now()
	l, err := x.r.ListContainers(ctx, filter)
	x.m.record("ListContainers", start, err)
	return l, err
}

func (x *metered) GetContainerEvents(ctx context.Context, ch chan<- *runtimeapi.ContainerEventResponse) error {
	start := time.Now()
	err := x.r.GetContainerEvents(ctx, ch)
	x.m.record("GetContainerEvents", start, err)
	return err
}

func (x *metered) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	start := time.Now()
	ref, err := x.r.PullImage(ctx, image, auth, sandboxConfig)
	x.m.record("PullImage", start, err)
	return ref, err
}

func (x *metered) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	start := time.Now()
	i, err := x.r.ImageStatus(ctx, image)
	x.m.record("ImageStatus", start, err)
	return i, err
}

func (x *metered) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	start := time.Now()
	l, err := x.r.ListImages(ctx, filter)
	x.m.record("ListImages", start, err)
	return l, err
}

func (x *metered) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	start := time.Now()
	err := x.r.RemoveImage(ctx, image)
	x.m.record("RemoveImage", start, err)
	return err
}

func (x *metered) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	start := time.Now()
	r, err := x.r.ImageFsInfo(ctx)
	x.m.record("ImageFsInfo", start, err)
	return r, err
}

func (x *metered) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	start := time.Now()
	r, err := x.r.ListContainerStats(ctx, filter)
	x.m.record("ListContainerStats", start, err)
	return r, err
}

func (x *metered) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (string, error) {
	start := time.Now()
	u, err := x.r.Exec(ctx, req)
	x.m.record("Exec", start, err)
	return u, err
}

func (x *metered) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (string, error) {
	start := time.Now()
	u, err := x.r.Attach(ctx, req)
	x.m.record("Attach", start, err)
	return u, err
}

func (x *metered) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (string, error) {
	start := time.Now()
	u, err := x.r.PortForward(ctx, req)
	x.m.record("PortForward", start, err)
	return u, err
}

func (x *metered) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	start := time.Now()
	l, err := x.r.ListPodSandboxStats(ctx, filter)
	x.m.record("ListPodSandboxStats", start, err)
	return l, err
}

func (x *metered) ReopenContainerLog(ctx context.Context, containerID string) error {
	start := time.Now()
	err := x.r.ReopenContainerLog(ctx, containerID)
	x.m.record("ReopenContainerLog", start, err)
	return err
}
