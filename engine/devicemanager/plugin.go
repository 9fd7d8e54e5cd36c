package devicemanager

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/fsm"
)

// historyMax bounds the transitions a plugin machine keeps.
const historyMax = 50

// plugin owns one resource's device plugin machine (spec/device_plugin.hcl)
// and binds it to the Manager: its guard reads the device list the step
// delivers, its actions change the Manager's endpoints and devices. The
// Manager fires a plugin's events one at a time, under Manager.fmu, so
// every field here is touched under that lock only.
type plugin struct {
	m        *Manager
	resource string
	machine  *fsm.DevicePluginMachine
	steps    fire.Run[fsm.DevicePluginState, fsm.DevicePluginEvent, fsm.DevicePluginAction, fsm.DevicePluginGuard, *plugin]
	hist     history.Log

	// What the event being fired carries: the endpoint that registered
	// (registered), the list it sent (devices), why its stream ended
	// (stream_ended).
	next  *endpoint
	list  []*pluginapi.Device
	ended error
}

// work is what a plugin machine's action does, returned without doing it;
// the plugin's Exec runs it after the transition, outside the machine.
type work func() error

// pluginObservers are the plugin machine's: those every machine kind has
// (engine/observe: metrics, history, debug log, Config.Sinks' Steps).
var pluginObservers = observe.Common[*plugin](&fsm.DevicePluginKind)

var _ fsm.DevicePluginImpl[work] = (*plugin)(nil)
var _ fsm.DevicePluginDurations = (*plugin)(nil)
var _ observe.Owner = (*plugin)(nil)

// newPlugin returns the machine of resource in state s: absent for a
// resource whose plugin registers for the first time, gone for one of
// the checkpoint. m.fmu is held.
func (m *Manager) newPlugin(resource string, s fsm.DevicePluginState) *plugin {
	p := &plugin{m: m, resource: resource, hist: history.Log{Max: historyMax}}
	p.machine = fsm.BindDevicePluginMachine(s, p)
	p.steps = fire.NewRun(p, pluginObservers)
	m.plugins[resource] = p
	return p
}

// fire delivers ev to the machine (engine/fire's loop: the observers, the
// step's actions); m.fmu is held.
func (p *plugin) fire(ev fsm.DevicePluginEvent) {
	fire.Fire(context.Background(), p.machine, &p.steps, ev)
	p.next, p.list, p.ended = nil, nil, nil
}

// due fires the timer of the machine's state that ran out by now (gone's
// grace_over after endpoint_grace, counted from when it entered gone);
// m.fmu is held.
func (p *plugin) due(now time.Time) {
	for _, t := range p.machine.Timers() {
		if d := fsm.DevicePluginDurationOf(p, t.After); d >= 0 && now.Sub(p.steps.Since()) > d {
			p.fire(t.Event)
			return
		}
	}
}

// AnyHealthy: the list being delivered has a healthy device.
func (p *plugin) AnyHealthy() bool {
	for _, d := range p.list {
		if d != nil && d.ID != "" && d.Health == pluginapi.Healthy {
			return true
		}
	}
	return false
}

// EndpointGrace is EndpointGracePeriod.
func (p *plugin) EndpointGrace() time.Duration { return EndpointGracePeriod }

// ConnectEndpoint installs the endpoint that registered, closing the
// resource's earlier one, and reads its stream on a goroutine of its own.
func (p *plugin) ConnectEndpoint() work {
	e := p.next
	return func() error {
		p.m.install(e)
		return nil
	}
}

// RecordDevices records the list the endpoint sent.
func (p *plugin) RecordDevices() work {
	list := p.list
	return func() error {
		p.m.record(p.resource, list)
		return nil
	}
}

// MarkUnhealthy: the stream ended; every device is unhealthy.
func (p *plugin) MarkUnhealthy() work {
	err := p.ended
	return func() error {
		p.m.lost(p.resource, err)
		return nil
	}
}

// RemoveResource forgets the resource: 0 in the Node's status.
func (p *plugin) RemoveResource() work {
	return func() error {
		p.m.remove(p.resource)
		return nil
	}
}

// Exec runs an action's work.
func (p *plugin) Exec(_ context.Context, w work) error { return w() }

// The plugin machine has no pod: its steps go to its own history, and are
// told to the Manager's sinks with the resource as the machine's instance.
func (p *plugin) Sinks() *observe.Sinks { return p.m.sinks }
func (p *plugin) Now() time.Time        { return p.m.cfg.Now() }
func (p *plugin) Logger() *slog.Logger  { return p.m.log }
func (p *plugin) LogAttrs() []any       { return []any{"resource", p.resource} }
func (p *plugin) Record() *history.Log  { return &p.hist }
func (p *plugin) Instance() string      { return p.resource }
func (p *plugin) PodUID() types.UID     { return "" }
