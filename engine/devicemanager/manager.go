// Package devicemanager is kubelet's device-plugin manager
// (pkg/kubelet/cm/devicemanager, API k8s.io/kubelet deviceplugin v1beta1):
// the Registration server on `<root-dir>/device-plugins/kubelet.sock`,
// one endpoint per registered resource (its options, its ListAndWatch
// stream of devices and their health, GetPreferredAllocation, Allocate,
// PreStartContainer), the extended resources it gives the Node's capacity
// and allocatable, the allocation of devices to containers at admission
// and their CRI devices, mounts, environment, annotations and CDI devices
// at container creation, and kubelet's checkpoint
// (`kubelet_internal_checkpoint`) that keeps the allocations of running
// pods across a restart.
//
// A plugin's life is the device plugin machine of spec/device_plugin.hcl,
// one per resource (plugin.go owns it; fsm.DevicePluginMachine): it
// registers (Register: API version, resource name, endpoint socket in the
// same directory, dialled and asked its options; event registered); its
// devices come and change health through ListAndWatch (devices: healthy
// or unhealthy); when the stream ends the plugin is gone and all its
// devices are unhealthy (stream_ended: allocatable 0, capacity kept);
// after EndpointGracePeriod (kubelet's 5 min) without a new registration
// the resource is removed (grace_over, found by Capacity: 0 in the Node's
// capacity). A plugin registering again replaces its endpoint. The
// registration socket is made anew at each start (stale sockets of the
// directory are removed first), which is how plugins learn to register
// again; a resource of the checkpoint starts in gone. The allocation is
// no row of the machine (spec/device_plugin.hcl says why): it reads the
// devices the machine's actions recorded.
package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/speclet/speclet/engine/devicemanager/checkpoint"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/fsm"
)

// Defaults.
const (
	// SocketName is the registration socket's name in the directory.
	SocketName = "kubelet.sock"
	// EndpointGracePeriod is how long a gone plugin's resource keeps its
	// capacity (kubelet's endpointStopGracePeriod).
	EndpointGracePeriod = 5 * time.Minute
	// MaxRegistrations is how many Register calls are handled at once;
	// more are refused at once (ResourceExhausted), so a flood of
	// registrations costs at most that many dials.
	MaxRegistrations = 4
	// MaxResources is how many resources may be registered.
	MaxResources = 64
)

// Config configures a Manager.
type Config struct {
	// Dir is the device-plugins directory (`<root-dir>/device-plugins`).
	Dir string
	// Changed is told when a resource's devices or health change, from
	// a device plugin machine's action: it must not block nor call the
	// Manager. nil: nobody is told.
	Changed func()
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger
	// Sinks are where the device plugin machines' steps go besides their
	// histories (engine/observe: the metrics, Steps); nil: none.
	Sinks *observe.Sinks
}

// Manager is the device-plugin manager of one node. Its methods are safe
// for concurrent use.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	sem    chan struct{}
	server *grpc.Server
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	sinks *observe.Sinks // read and set under fmu

	// fmu serializes the steps of the plugin machines, by resource in
	// plugins; it is taken before mu, never under it.
	fmu     sync.Mutex
	plugins map[string]*plugin

	mu        sync.Mutex
	endpoints map[string]*endpoint
	devices   map[string]map[string]*pluginapi.Device // the last list of each resource's plugin
	healthy   map[string]map[string]bool
	unhealthy map[string]map[string]bool
	removed   map[string]bool // resources past their grace: 0 in the Node's status
	pods      podDevices
	pending   map[string]map[string]bool // resource -> devices an Allocate call is out for
	reuse     map[string]map[string]bool // resource -> devices of the admitted pod's init containers
	reuseUID  string
}

// New returns a manager of cfg.Dir; Start serves it.
func New(cfg Config) *Manager {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	sinks := cfg.Sinks
	if sinks == nil {
		sinks = &observe.Sinks{}
	}
	return &Manager{
		cfg: cfg, log: cfg.Log.With("component", "devicemanager"), sinks: sinks,
		plugins:   map[string]*plugin{},
		sem:       make(chan struct{}, MaxRegistrations),
		endpoints: map[string]*endpoint{},
		devices:   map[string]map[string]*pluginapi.Device{},
		healthy:   map[string]map[string]bool{},
		unhealthy: map[string]map[string]bool{},
		removed:   map[string]bool{},
		pods:      podDevices{},
	}
}

// Observe sends the device plugin machines' steps from now on to s (the
// engine's metrics and Config.Steps: engine.Engine.Sinks) instead of
// Config.Sinks; nil: nowhere. It may be called on nil.
func (m *Manager) Observe(s *observe.Sinks) {
	if m == nil {
		return
	}
	if s == nil {
		s = &observe.Sinks{}
	}
	m.fmu.Lock()
	defer m.fmu.Unlock()
	m.sinks = s
}

// SocketPath is the registration socket.
func (m *Manager) SocketPath() string { return filepath.Join(m.cfg.Dir, SocketName) }

// Start makes the directory, removes the sockets left in it, reads the
// checkpoint (a missing one is a first start; a corrupt one is logged and
// the allocations start empty, as under kubelet) and serves the
// Registration service on the socket until Stop.
func (m *Manager) Start() error {
	if err := os.MkdirAll(m.cfg.Dir, 0o750); err != nil {
		return fmt.Errorf("create device plugin directory: %w", err)
	}
	if err := m.cleanup(); err != nil {
		return err
	}
	if err := m.readCheckpoint(); err != nil {
		m.log.Error("device allocations may not be up to date", "err", err)
	}
	l, err := net.Listen("unix", m.SocketPath())
	if err != nil {
		return fmt.Errorf("listen on device plugin registration socket: %w", err)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.server = grpc.NewServer()
	pluginapi.RegisterRegistrationServer(m.server, registration{m: m})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if err := m.server.Serve(l); err != nil {
			m.log.Error("device plugin registration server stopped", "socket", m.SocketPath(), "err", err)
		}
	}()
	m.log.Info("device plugin registration server listening", "socket", m.SocketPath(), "version", pluginapi.Version)
	return nil
}

// Stop stops the server and disconnects every plugin; the checkpoint
// stays for the next start. It may be called more than once, and on nil.
func (m *Manager) Stop() {
	if m == nil || m.server == nil {
		return
	}
	m.server.Stop()
	m.cancel()
	m.mu.Lock()
	for _, e := range m.endpoints {
		e.close()
	}
	m.mu.Unlock()
	m.wg.Wait()
	m.server = nil
}

// cleanup removes the sockets of the directory but the checkpoint (kubelet's
// CleanupPluginDirectory): plugins watching it register again.
func (m *Manager) cleanup() error {
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return fmt.Errorf("read device plugin directory: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == checkpoint.FileName || e.Type()&os.ModeSocket == 0 {
			continue
		}
		if err := os.Remove(filepath.Join(m.cfg.Dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("clean device plugin directory: %w", err)
	}
	return nil
}

// connected fires registered on the machine of e's resource (made in
// absent for a new resource): connect_endpoint installs e.
func (m *Manager) connected(e *endpoint) {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	p := m.plugins[e.resource]
	if p == nil {
		p = m.newPlugin(e.resource, fsm.DevicePluginInitialState)
	}
	p.next = e
	p.fire(fsm.DevicePluginEventRegistered)
}

// install is connect_endpoint: e becomes its resource's endpoint (a plugin
// registering again replaces its earlier one, which is closed) and its
// stream is read until it ends; then, if e is still the resource's
// endpoint, stream_ended is fired.
func (m *Manager) install(e *endpoint) {
	m.mu.Lock()
	if old := m.endpoints[e.resource]; old != nil {
		old.close()
	}
	m.endpoints[e.resource] = e
	delete(m.removed, e.resource)
	if m.healthy[e.resource] == nil {
		m.healthy[e.resource], m.unhealthy[e.resource] = map[string]bool{}, map[string]bool{}
	}
	m.mu.Unlock()
	m.log.Info("device plugin registered", "resource", e.resource, "endpoint", e.socket,
		"preStartRequired", e.opts.GetPreStartRequired(), "getPreferredAllocationAvailable", e.opts.GetGetPreferredAllocationAvailable())
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		err := e.run(m.ctx, func(devs []*pluginapi.Device) { m.updateDevices(e, devs) })
		e.close()
		m.fmu.Lock()
		defer m.fmu.Unlock()
		if p := m.plugins[e.resource]; p != nil && m.current(e) {
			p.ended = err
			p.fire(fsm.DevicePluginEventStreamEnded)
		}
	}()
}

// current: e is its resource's endpoint (not replaced since).
func (m *Manager) current(e *endpoint) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.endpoints[e.resource] == e
}

// lost is mark_unhealthy: the resource's endpoint stopped now and every
// device is unhealthy (kubelet's PluginDisconnected).
func (m *Manager) lost(resource string, err error) {
	m.mu.Lock()
	if e := m.endpoints[resource]; e != nil {
		e.stop(m.cfg.Now())
	}
	m.markUnhealthy(resource)
	m.mu.Unlock()
	m.log.Warn("device plugin gone: its devices are unhealthy", "resource", resource, "err", err)
	m.writeCheckpoint()
	m.changed()
}

// updateDevices fires devices with a ListAndWatch reply of e, unless e was
// replaced since.
func (m *Manager) updateDevices(e *endpoint, devs []*pluginapi.Device) {
	m.fmu.Lock()
	defer m.fmu.Unlock()
	if p := m.plugins[e.resource]; p != nil && m.current(e) {
		p.list = devs
		p.fire(fsm.DevicePluginEventDevices)
	}
}

// record is record_devices: the resource's devices and their health
// (kubelet's genericDeviceUpdateCallback).
func (m *Manager) record(resource string, devs []*pluginapi.Device) {
	all, healthy, unhealthy := map[string]*pluginapi.Device{}, map[string]bool{}, map[string]bool{}
	for _, d := range devs {
		if d == nil || d.ID == "" {
			continue
		}
		all[d.ID] = d
		if d.Health == pluginapi.Healthy {
			healthy[d.ID] = true
		} else {
			unhealthy[d.ID] = true
		}
	}
	m.mu.Lock()
	m.devices[resource], m.healthy[resource], m.unhealthy[resource] = all, healthy, unhealthy
	m.mu.Unlock()
	m.log.Info("device plugin devices", "resource", resource, "total", len(all), "healthy", len(healthy))
	m.writeCheckpoint()
	m.changed()
}

// remove is remove_resource: the resource's endpoint and devices are
// forgotten, and it is 0 in the Node's status.
func (m *Manager) remove(resource string) {
	m.mu.Lock()
	delete(m.endpoints, resource)
	delete(m.healthy, resource)
	delete(m.unhealthy, resource)
	delete(m.devices, resource)
	m.removed[resource] = true
	m.mu.Unlock()
	m.log.Info("device plugin resource removed: its grace period passed", "resource", resource, "grace", EndpointGracePeriod)
	m.writeCheckpoint()
}

// markUnhealthy makes every device of resource unhealthy; m.mu is held.
func (m *Manager) markUnhealthy(resource string) {
	if m.unhealthy[resource] == nil {
		m.unhealthy[resource] = map[string]bool{}
	}
	for id := range m.healthy[resource] {
		m.unhealthy[resource][id] = true
	}
	m.healthy[resource] = map[string]bool{}
}

func (m *Manager) changed() {
	if m.cfg.Changed != nil {
		m.cfg.Changed()
	}
}
