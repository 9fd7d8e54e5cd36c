package devicemanager

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/speclet/speclet/engine/internal/suite"
	"github.com/speclet/speclet/engine/observe"
)

// fakePlugin is a device plugin on a unix socket of the manager's
// directory, served over real gRPC.
type fakePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	t        *testing.T
	resource string
	socket   string
	opts     *pluginapi.DevicePluginOptions
	server   *grpc.Server
	updates  chan []*pluginapi.Device

	mu        sync.Mutex
	devs      []*pluginapi.Device
	allocated [][]string
	preStarts [][]string
	preferred []string // GetPreferredAllocation's answer
	// dies: the plugin dies in its next Allocate, before it answers.
	dies bool
	// optionsGate, when set, is waited on by GetDevicePluginOptions.
	optionsGate chan struct{}
	optionsSeen chan struct{}
	// listGate, when set, is waited on by ListAndWatch before its first
	// list.
	listGate chan struct{}
}

func newFakePlugin(t *testing.T, dir, resource, name string, devs ...*pluginapi.Device) *fakePlugin {
	t.Helper()
	p := &fakePlugin{t: t, resource: resource, socket: filepath.Join(dir, name), opts: &pluginapi.DevicePluginOptions{},
		updates: make(chan []*pluginapi.Device, 16), devs: devs, optionsSeen: make(chan struct{}, 64)}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *fakePlugin) start() {
	p.t.Helper()
	os.Remove(p.socket)
	l, err := net.Listen("unix", p.socket)
	if err != nil {
		p.t.Fatal(err)
	}
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, p)
	go p.server.Serve(l)
}

// stop kills the plugin: its server and every stream end at once.
func (p *fakePlugin) stop() {
	if p.server != nil {
		p.server.Stop()
	}
	os.Remove(p.socket)
}

func healthy(ids ...string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for _, id := range ids {
		out = append(out, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	return out
}

func (p *fakePlugin) GetDevicePluginOptions(ctx context.Context, _ *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	p.optionsSeen <- struct{}{}
	if p.optionsGate != nil {
		select {
		case <-p.optionsGate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return p.opts, nil
}

func (p *fakePlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	p.mu.Lock()
	gate := p.listGate
	p.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-s.Context().Done():
			return nil
		}
	}
	p.mu.Lock()
	first := p.devs
	p.mu.Unlock()
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: first}); err != nil {
		return err
	}
	for {
		select {
		case devs := <-p.updates:
			if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
				return err
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *fakePlugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: p.preferred}}}, nil
}

func (p *fakePlugin) Allocate(ctx context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	if p.dies {
		go p.server.Stop()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range r.ContainerRequests {
		p.mu.Lock()
		p.allocated = append(p.allocated, cr.DevicesIds)
		p.mu.Unlock()
		c := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}, Annotations: map[string]string{}}
		for _, id := range cr.DevicesIds {
			c.Envs["DEV_"+id] = id
			c.Mounts = append(c.Mounts, &pluginapi.Mount{ContainerPath: "/dev-" + id, HostPath: "/tmp/" + id, ReadOnly: true})
			c.Devices = append(c.Devices, &pluginapi.DeviceSpec{ContainerPath: "/dev/" + id, HostPath: "/dev/null", Permissions: "rw"})
			c.Annotations["example.com/"+id] = "1"
			c.CdiDevices = append(c.CdiDevices, &pluginapi.CDIDevice{Name: p.resource + "=" + id})
		}
		resp.ContainerResponses = append(resp.ContainerResponses, c)
	}
	return resp, nil
}

func (p *fakePlugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preStarts = append(p.preStarts, r.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

// register registers the plugin with the manager's socket, as a plugin
// does.
func (p *fakePlugin) register(m *Manager) error {
	return registerWith(m, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: filepath.Base(p.socket), ResourceName: p.resource, Options: p.opts})
}

func registerWith(m *Manager, req *pluginapi.RegisterRequest) error {
	conn, err := grpc.NewClient("unix://"+m.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(context.Background(), req)
	return err
}

// startManager starts a manager of a new directory; changes are told on
// the returned channel.
func startManager(t *testing.T, dir string) (*Manager, chan struct{}) {
	return startManagerWith(t, Config{Dir: dir})
}

// startManagerWith starts a manager of cfg; its machines' steps go to the
// row coverage of the engine tests (engine/internal/suite) and to
// cfg.Sinks' Steps, if any.
func startManagerWith(t *testing.T, cfg Config) (*Manager, chan struct{}) {
	t.Helper()
	changed := make(chan struct{}, 1)
	cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Changed = func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	var tell func(observe.Step)
	if cfg.Sinks != nil {
		tell = cfg.Sinks.Steps
	}
	cfg.Sinks = &observe.Sinks{Steps: func(s observe.Step) {
		suite.Took(s.Machine, s.Row, s.Choices)
		if tell != nil {
			tell(s)
		}
	}}
	m := New(cfg)
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m, changed
}

// waitFor waits for cond, checked at each change the manager tells.
func waitFor(t *testing.T, changed chan struct{}, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-changed:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("waiting for %s: never", what)
		}
	}
}

// counts are the capacity and allocatable of resource.
func counts(m *Manager, res string) (int64, int64) {
	c, a := m.Capacity()
	cq, aq := c[v1.ResourceName(res)], a[v1.ResourceName(res)]
	return cq.Value(), aq.Value()
}

func devicePod(uid string, res string, n int64) *v1.Pod {
	pod := &v1.Pod{}
	pod.UID = types.UID(uid)
	pod.Name, pod.Namespace = "p-"+uid, "default"
	q := *resource.NewQuantity(n, resource.DecimalSI)
	pod.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceName(res): q}, Requests: v1.ResourceList{v1.ResourceName(res): q}}}}
	return pod
}
