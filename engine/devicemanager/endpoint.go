package devicemanager

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Timeouts of the calls to a plugin. kubelet gives its dial 10 s and its
// other calls none; speclet bounds every call, since an admission waits
// for Allocate and a container's start for PreStartContainer.
const (
	DialTimeout = 10 * time.Second
	CallTimeout = 30 * time.Second
)

// endpoint is one registered plugin: its connection, the options it gave
// at registration, and when its ListAndWatch stream ended (zero while it
// runs). A resource keeps its endpoint after the plugin is gone, stopped,
// until EndpointGracePeriod has passed (kubelet's endpointStopGracePeriod).
type endpoint struct {
	resource string
	socket   string
	opts     *pluginapi.DevicePluginOptions
	conn     *grpc.ClientConn
	api      pluginapi.DevicePluginClient

	mu      sync.Mutex
	stopped time.Time
}

// dial connects to the plugin's socket and reads its options
// (GetDevicePluginOptions), as kubelet's client.Connect and
// PluginConnected do.
func dial(ctx context.Context, resource, socket string) (*endpoint, error) {
	if fi, err := os.Stat(socket); err != nil {
		return nil, fmt.Errorf("failed to dial device plugin: %w", err)
	} else if fi.Mode()&os.ModeSocket == 0 {
		return nil, fmt.Errorf("failed to dial device plugin: %s is not a socket", socket)
	}
	dctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	//nolint:staticcheck // a blocking dial, as kubelet's: the plugin must answer before it is registered
	conn, err := grpc.DialContext(dctx, socket,
		grpc.WithAuthority("localhost"),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithBlock(),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("failed to dial device plugin: %s: %w", socket, err)
	}
	e := &endpoint{resource: resource, socket: socket, conn: conn, api: pluginapi.NewDevicePluginClient(conn)}
	octx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	opts, err := e.api.GetDevicePluginOptions(octx, &pluginapi.Empty{})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("failed to get device plugin options: %w", err)
	}
	e.opts = opts
	return e, nil
}

// stoppedEndpoint is a resource known from the checkpoint whose plugin has
// not registered since the start (kubelet's newStoppedEndpointImpl).
func stoppedEndpoint(resource string, now time.Time) *endpoint {
	return &endpoint{resource: resource, stopped: now, opts: &pluginapi.DevicePluginOptions{}}
}

// run reads the plugin's ListAndWatch stream until it ends, telling each
// device list to update; it returns the error that ended the stream.
func (e *endpoint) run(ctx context.Context, update func([]*pluginapi.Device)) error {
	stream, err := e.api.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		update(resp.Devices)
	}
}

// close ends the connection; the stream's run ends with it.
func (e *endpoint) close() {
	if e.conn != nil {
		e.conn.Close()
	}
}

func (e *endpoint) stop(now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped.IsZero() {
		e.stopped = now
	}
}

// stoppedAt is when the plugin went away; zero while it is connected.
func (e *endpoint) stoppedAt() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopped
}

func (e *endpoint) errStopped() error {
	return fmt.Errorf("endpoint %s has been stopped", e.resource)
}

// allocate is the plugin's Allocate of devs for one container.
func (e *endpoint) allocate(ctx context.Context, devs []string) (*pluginapi.AllocateResponse, error) {
	if !e.stoppedAt().IsZero() || e.api == nil {
		return nil, e.errStopped()
	}
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	return e.api.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: devs}},
	})
}

// preStart is the plugin's PreStartContainer of devs.
func (e *endpoint) preStart(ctx context.Context, devs []string) error {
	if !e.stoppedAt().IsZero() || e.api == nil {
		return e.errStopped()
	}
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	_, err := e.api.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: devs})
	return err
}

// preferred is the plugin's GetPreferredAllocation of size devices out of
// available, mustInclude among them.
func (e *endpoint) preferred(ctx context.Context, available, mustInclude []string, size int) ([]string, error) {
	if !e.stoppedAt().IsZero() || e.api == nil {
		return nil, e.errStopped()
	}
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	resp, err := e.api.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs:   available,
			MustIncludeDeviceIDs: mustInclude,
			AllocationSize:       int32(size),
		}},
	})
	if err != nil {
		return nil, err
	}
	if len(resp.ContainerResponses) == 0 {
		return nil, nil
	}
	return resp.ContainerResponses[0].DeviceIDs, nil
}
