package cri

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// DefaultTimeout bounds every call but PullImage and GetContainerEvents,
	// like kubelet's --runtime-request-timeout.
	DefaultTimeout = 2 * time.Minute
	// MaxMsgSize is the largest message sent or received, as in kubelet
	// (ListContainers on a busy node is large).
	MaxMsgSize = 16 * 1024 * 1024
)

// Option configures a Client.
type Option func(*options)

type options struct {
	timeout     time.Duration
	pullTimeout time.Duration
	unary       []grpc.UnaryClientInterceptor
	stream      []grpc.StreamClientInterceptor
	dialer      func(context.Context, string) (net.Conn, error)
}

// WithTimeout sets the per-call timeout (default DefaultTimeout). It does not
// apply to PullImage (see WithPullTimeout) nor to GetContainerEvents, which
// runs until its context ends.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithPullTimeout bounds PullImage calls. The default, 0, means no bound
// other than the caller's context, as in kubelet: pulls of large images
// legitimately take long.
func WithPullTimeout(d time.Duration) Option { return func(o *options) { o.pullTimeout = d } }

// WithInterceptors adds a unary and a stream gRPC client interceptor (either
// may be nil) to every call of the client: they see each gRPC call the
// client makes, with the caller's context values, the request, the reply
// and the gRPC error (a status error, before the client makes it an
// *Error). Interceptors of several options run in the order given, the
// first outermost. The method an interceptor is given is the full gRPC
// name ("/runtime.v1.RuntimeService/StartContainer"); Method returns the
// CRI method's name. A list call split by sandbox (see splitter) is several
// gRPC calls: a ListPodSandbox and one call per sandbox.
func WithInterceptors(unary grpc.UnaryClientInterceptor, stream grpc.StreamClientInterceptor) Option {
	return func(o *options) {
		if unary != nil {
			o.unary = append(o.unary, unary)
		}
		if stream != nil {
			o.stream = append(o.stream, stream)
		}
	}
}

// WithDialer makes the client reach the runtime through dial instead of
// the endpoint's unix socket; the endpoint still names the runtime in
// errors. Tests use it to serve a runtime over an in-memory connection
// (google.golang.org/grpc/test/bufconn), inside a testing/synctest bubble.
func WithDialer(dial func(ctx context.Context, addr string) (net.Conn, error)) Option {
	return func(o *options) { o.dialer = dial }
}

// Method returns the CRI method's name ("StartContainer") of a full gRPC
// method name ("/runtime.v1.RuntimeService/StartContainer").
func Method(fullMethod string) string {
	return fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
}

// Client is a Runtime reached over gRPC on a unix socket. Every error it
// returns is an *Error naming the endpoint and the call.
type Client struct {
	endpoint string
	opts     options
	conn     *grpc.ClientConn
	rt       runtimeapi.RuntimeServiceClient
	img      runtimeapi.ImageServiceClient
	split    splitter // which list calls go per sandbox (split.go)
}

var _ Full = (*Client)(nil)

// Dial returns a client for the runtime at endpoint ("unix:///path/to.sock"
// or an absolute socket path). Dial does not wait for the runtime: a wrong
// socket path or a runtime that is down shows as a ClassUnavailable error on
// the first call, and the client reconnects by itself (backoff capped at 3 s)
// when the runtime comes back. ctx is unused today and kept for dialers that
// may need it.
func Dial(ctx context.Context, endpoint string, opts ...Option) (*Client, error) {
	_ = ctx
	o := options{timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	ep, err := normalizeEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	dopts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMsgSize), grpc.MaxCallSendMsgSize(MaxMsgSize)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithChainUnaryInterceptor(o.unary...),
		grpc.WithChainStreamInterceptor(o.stream...),
	}
	if o.dialer != nil {
		dopts = append(dopts, grpc.WithContextDialer(o.dialer))
	}
	conn, err := grpc.NewClient(ep, dopts...)
	if err != nil {
		return nil, fmt.Errorf("cri %s: dial: %w", ep, err)
	}
	return &Client{
		endpoint: ep,
		opts:     o,
		conn:     conn,
		rt:       runtimeapi.NewRuntimeServiceClient(conn),
		img:      runtimeapi.NewImageServiceClient(conn),
	}, nil
}

// normalizeEndpoint accepts "unix:///abs/path" and "/abs/path" and returns
// the unix:// form.
func normalizeEndpoint(endpoint string) (string, error) {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok {
		if strings.Contains(endpoint, "://") {
			return "", fmt.Errorf("cri endpoint %q: only unix:// endpoints are supported", endpoint)
		}
		path = endpoint
	}
	if !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("cri endpoint %q: want an absolute socket path, as in unix:///run/containerd/containerd.sock", endpoint)
	}
	return "unix://" + path, nil
}

// Endpoint returns the endpoint in its unix:// form.
func (c *Client) Endpoint() string { return c.endpoint }

// Close closes the connection. Calls in flight fail.
func (c *Client) Close() error { return c.conn.Close() }

// ctx bounds a call by the client's call timeout.
func (c *Client) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return bounded(ctx, c.opts.timeout, 0)
}

// bounded returns ctx with a deadline d+extra from now, or only a cancel
// when d <= 0 (no bound but ctx). extra is time a call may legitimately
// spend on the runtime's side beyond d: a grace period, an exec timeout.
func bounded(ctx context.Context, d, extra time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d+extra)
}

func (c *Client) err(op, id string, err error) error { return wrap(c.endpoint, op, id, err) }

// Version returns the runtime's name and version.
func (c *Client) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	r, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
	if err != nil {
		return nil, c.err("Version", "", err)
	}
	return r, nil
}

// Status returns the runtime's conditions (RuntimeReady, NetworkReady).
func (c *Client) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	r, err := c.rt.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
	if err != nil {
		return nil, c.err("Status", "", err)
	}
	if r.Status == nil {
		return nil, c.err("Status", "", errors.New("runtime returned no status"))
	}
	return r, nil
}

// RunPodSandbox creates and starts a sandbox and returns its id.
func (c *Client) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	r, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler})
	if err != nil {
		return "", c.err("RunPodSandbox", sandboxName(config), err)
	}
	if r.PodSandboxId == "" {
		return "", c.err("RunPodSandbox", sandboxName(config), errors.New("runtime returned an empty sandbox id"))
	}
	return r.PodSandboxId, nil
}

func sandboxName(config *runtimeapi.PodSandboxConfig) string {
	m := config.GetMetadata()
	if m == nil {
		return ""
	}
	return m.Namespace + "/" + m.Name
}

// StopPodSandbox stops every container of the sandbox and the sandbox.
func (c *Client) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podSandboxID})
	return c.err("StopPodSandbox", podSandboxID, err)
}

// RemovePodSandbox removes the sandbox and its containers.
func (c *Client) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podSandboxID})
	return c.err("RemovePodSandbox", podSandboxID, err)
}

// PodSandboxStatus returns the status of a sandbox.
func (c *Client) PodSandboxStatus(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStatus, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	r, err := c.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podSandboxID})
	if err != nil {
		return nil, c.err("PodSandboxStatus", podSandboxID, err)
	}
	if r.Status == nil {
		return nil, c.err("PodSandboxStatus", podSandboxID, errors.New("runtime returned no status"))
	}
	return r.Status, nil
}

// ListPodSandbox lists the sandboxes that match filter (nil: all).
func (c *Client) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	r, err := c.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter})
	if err != nil {
		return nil, c.err("ListPodSandbox", "", err)
	}
	return r.Items, nil
}

// CreateContainer creates a container in a sandbox and returns its id.
func (c *Client) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	r, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podSandboxID, Config: config, SandboxConfig: sandboxConfig})
	id := podSandboxID + "/" + config.GetMetadata().GetName()
	if err != nil {
		return "", c.err("CreateContainer", id, err)
	}
	if r.ContainerId == "" {
		return "", c.err("CreateContainer", id, errors.New("runtime returned an empty container id"))
	}
	return r.ContainerId, nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, containerID string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: containerID})
	return c.err("StartContainer", containerID, err)
}

// StopContainer sends SIGTERM and, timeout seconds later, SIGKILL; it
// returns when the container has stopped. The call's deadline is extended
// by timeout, as in kubelet, so a long grace period is not cut short.
func (c *Client) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	ctx, cancel := bounded(ctx, c.opts.timeout, time.Duration(timeout)*time.Second)
	defer cancel()
	_, err := c.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: containerID, Timeout: timeout})
	return c.err("StopContainer", containerID, err)
}

// RemoveContainer removes a container, stopping it first if it runs.
func (c *Client) RemoveContainer(ctx context.Context, containerID string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: containerID})
	return c.err("RemoveContainer", containerID, err)
}

// ContainerStatus returns the status of a container.
func (c *Client) ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	r, err := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID})
	if err != nil {
		return nil, c.err("ContainerStatus", containerID, err)
	}
	if r.Status == nil {
		return nil, c.err("ContainerStatus", containerID, errors.New("runtime returned no status"))
	}
	return r.Status, nil
}

// ExecSync runs cmd in a running container. The CRI timeout is timeout
// rounded up to whole seconds (0: none); the call's deadline is the client's
// call timeout plus timeout, as StopContainer's, so a slow command is ended
// by the runtime first.
func (c *Client) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (ExecResult, error) {
	secs := execSeconds(timeout)
	ctx, cancel := bounded(ctx, c.opts.timeout, time.Duration(secs)*time.Second)
	defer cancel()
	r, err := c.rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd, Timeout: secs})
	if err != nil {
		return ExecResult{}, c.err("ExecSync", containerID, err)
	}
	return ExecResult{Stdout: r.Stdout, Stderr: r.Stderr, ExitCode: r.ExitCode}, nil
}

// execSeconds rounds an exec timeout up to the whole seconds of the CRI.
func execSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// GetContainerEvents streams container events into ch until ctx ends (it
// then returns nil) or the stream breaks (an *Error). A runtime without the
// call gives ClassUnimplemented at once. Sends to ch block; give a buffered
// channel and drain it.
func (c *Client) GetContainerEvents(ctx context.Context, ch chan<- *runtimeapi.ContainerEventResponse) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return c.eventsErr(ctx, err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return c.eventsErr(ctx, err)
		}
		select {
		case ch <- ev:
		case <-ctx.Done():
			return nil
		}
	}
}

func (c *Client) eventsErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("runtime closed the event stream")
	}
	return c.err("GetContainerEvents", "", err)
}

// PullImage pulls an image and returns the image id the runtime reports.
// A reference that does not exist gives ClassImageNotFound.
func (c *Client) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := bounded(ctx, c.opts.pullTimeout, 0)
	defer cancel()
	r, err := c.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: sandboxConfig})
	if err != nil {
		return "", c.err("PullImage", image.GetImage(), err)
	}
	if r.ImageRef == "" {
		return "", c.err("PullImage", image.GetImage(), errors.New("runtime returned an empty image reference"))
	}
	return r.ImageRef, nil
}

// ImageStatus returns the image, or nil, nil when it is not present.
func (c *Client) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	r, err := c.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image})
	if err != nil {
		return nil, c.err("ImageStatus", image.GetImage(), err)
	}
	return r.Image, nil
}

// ListImages lists the images that match filter (nil: all).
func (c *Client) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	r, err := c.img.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: filter})
	if err != nil {
		return nil, c.err("ListImages", "", err)
	}
	return r.Images, nil
}

// RemoveImage removes an image by id or reference; an image that is not
// present is no error.
func (c *Client) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	if _, err := c.img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: image}); err != nil {
		return c.err("RemoveImage", image.GetImage(), err)
	}
	return nil
}

// ImageFsInfo returns the usage of the runtime's image filesystems.
func (c *Client) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	r, err := c.img.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return nil, c.err("ImageFsInfo", "", err)
	}
	return r, nil
}
