// Package pleg is the pod lifecycle event generator: it turns the
// runtime's container and sandbox states into per-pod events (a container
// started, died, was removed or changed; a sandbox died) by diffing what it
// observed, from a periodic relist (ListContainers, ListPodSandbox) and
// from the runtime's event stream (GetContainerEvents) when it offers one.
// Both paths update one record, so no change is reported twice. Only
// objects that Identify gives a pod UID are considered.
package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
)

// PLEG timings, kubelet's: relist every second; with a runtime that streams
// container events the relist is only a safety net; no successful relist for
// three minutes makes the engine unhealthy.
const (
	RelistPeriod        = 1 * time.Second
	EventedRelistPeriod = 10 * time.Second
	UnhealthyAfter      = 3 * time.Minute
)

// ErrUnhealthy is wrapped by Healthy's error.
var ErrUnhealthy = errors.New("PLEG is not healthy")

// Type is what happened to a container between two observations.
type Type uint8

const (
	ContainerStarted Type = iota
	ContainerDied
	ContainerRemoved
	ContainerChanged
	SandboxDied // the pod's sandbox is not ready or gone
)

func (t Type) String() string {
	return [...]string{"ContainerStarted", "ContainerDied", "ContainerRemoved", "ContainerChanged", "SandboxDied"}[t]
}

// Event is one container or sandbox change of one speclet pod.
type Event struct {
	UID         types.UID
	Type        Type
	ContainerID string
	SandboxID   string // for SandboxDied
	Name        string // container name (from speclet's label)
	// Status is the container's full status when the source had it: the
	// event stream always has it, a relist never (the worker then reads it
	// with ContainerStatus when it records the exit).
	Status *runtimeapi.ContainerStatus
}

// Identify returns the pod UID and the container name a CRI object's labels
// name; an empty UID means the object is not the agent's and is ignored.
type Identify func(labels map[string]string) (uid types.UID, container string)

// listed is an object of a runtime list: a container or a sandbox.
type listed interface {
	GetId() string
	GetLabels() map[string]string
}

// eachOwned calls f, in list order, with each object of list that p's
// Identify gives a pod UID, that UID and the container name, and returns
// the IDs of those objects.
func eachOwned[T listed](p *PLEG, list []T, f func(obj T, uid types.UID, name string)) map[string]struct{} {
	ids := make(map[string]struct{}, len(list))
	for _, obj := range list {
		uid, name := p.identify(obj.GetLabels())
		if uid == "" {
			continue
		}
		ids[obj.GetId()] = struct{}{}
		f(obj, uid, name)
	}
	return ids
}

// containerRecord is what the PLEG remembers of a container.
type containerRecord struct {
	uid   types.UID
	name  string
	state runtimeapi.ContainerState
	seq   uint64 // observation number: newer than a relist's list means the list is stale for it
	gone  bool   // the stream reported it deleted; kept until a relist confirms
}

// PLEG turns the runtime's container states into per-pod events: a relist
// diffs ListContainers with the previous observation, and the runtime's event
// stream (GetContainerEvents) feeds the same diff when the runtime offers it.
// Both paths update one record so no change is reported twice.
type PLEG struct {
	rt       cri.Runtime
	clock    clock.PassiveClock
	identify Identify

	mu        sync.Mutex
	seen      map[string]containerRecord // container id -> record
	sandboxes map[string]sandboxRecord   // sandbox id -> record
	seq       uint64                     // counts observations from the event stream
	lastOK    time.Time
	lastErr   error
	evented   bool
}

func New(rt cri.Runtime, c clock.PassiveClock, identify Identify) *PLEG {
	return &PLEG{rt: rt, clock: c, identify: identify, seen: map[string]containerRecord{}, sandboxes: map[string]sandboxRecord{}, lastOK: c.Now()}
}

// sandboxRecord is what the PLEG remembers of a sandbox.
type sandboxRecord struct {
	uid       types.UID
	ready     bool
	forgotten bool // the engine stops or removes it itself: not news
}

// Relist lists the runtime's containers and returns the events since the last
// observation. Only containers with speclet's pod UID label are considered.
//
// The event stream may record changes while the list is in flight; a
// container the stream observed after the list began is left to the stream
// (the list may predate its creation or its last change).
func (p *PLEG) Relist(ctx context.Context) ([]Event, error) {
	p.mu.Lock()
	startSeq := p.seq
	p.mu.Unlock()
	cs, err := p.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		p.mu.Lock()
		p.lastErr = err
		p.mu.Unlock()
		return nil, fmt.Errorf("relist containers: %w", err)
	}
	p.mu.Lock()
	var evs []Event
	now := eachOwned(p, cs, func(c *runtimeapi.Container, uid types.UID, name string) {
		rec := containerRecord{uid: uid, name: name, state: c.State, seq: startSeq}
		old, had := p.seen[c.Id]
		if had && (old.state == rec.state && !old.gone || old.seq > startSeq) {
			return
		}
		p.seen[c.Id] = rec
		if t, ok := stateEvent(rec.state); ok {
			evs = append(evs, Event{UID: uid, Type: t, ContainerID: c.Id, Name: rec.name})
		}
	})
	for id, rec := range p.seen {
		if _, ok := now[id]; !ok && rec.seq <= startSeq {
			delete(p.seen, id)
			if !rec.gone {
				evs = append(evs, Event{UID: rec.uid, Type: ContainerRemoved, ContainerID: id, Name: rec.name})
			}
		}
	}
	p.mu.Unlock()
	sevs, err := p.relistSandboxes(ctx)
	if err != nil {
		p.mu.Lock()
		p.lastErr = err
		p.mu.Unlock()
		return evs, err
	}
	p.mu.Lock()
	p.lastOK = p.clock.Now()
	p.lastErr = nil
	p.mu.Unlock()
	return append(evs, sevs...), nil
}

// relistSandboxes lists the runtime's sandboxes and reports, once, each
// speclet sandbox that is not ready (on first sight, or after it was seen
// ready) or that vanished after it was seen ready, unless the engine forgot
// it (it stopped or removed it itself).
func (p *PLEG) relistSandboxes(ctx context.Context) ([]Event, error) {
	sbs, err := p.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		return nil, fmt.Errorf("relist sandboxes: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var evs []Event
	now := eachOwned(p, sbs, func(sb *runtimeapi.PodSandbox, uid types.UID, _ string) {
		ready := sb.State == runtimeapi.PodSandboxState_SANDBOX_READY
		old, had := p.sandboxes[sb.Id]
		if had && old.ready == ready {
			return
		}
		p.sandboxes[sb.Id] = sandboxRecord{uid: uid, ready: ready, forgotten: old.forgotten}
		if !ready && (!had || old.ready) && !old.forgotten {
			evs = append(evs, Event{UID: uid, Type: SandboxDied, SandboxID: sb.Id})
		}
	})
	for id, rec := range p.sandboxes {
		if _, ok := now[id]; !ok {
			delete(p.sandboxes, id)
			if rec.ready && !rec.forgotten {
				evs = append(evs, Event{UID: rec.uid, Type: SandboxDied, SandboxID: id})
			}
		}
	}
	return evs, nil
}

// UIDs returns the pod UIDs of the speclet sandboxes and containers in the
// last relist.
func (p *PLEG) UIDs() map[types.UID]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[types.UID]bool, len(p.sandboxes))
	for _, rec := range p.sandboxes {
		out[rec.uid] = true
	}
	for _, rec := range p.seen {
		if !rec.gone {
			out[rec.uid] = true
		}
	}
	return out
}

// ForgetSandbox marks a sandbox the engine stops or removes itself: its
// stop or disappearance is not reported.
func (p *PLEG) ForgetSandbox(id string) {
	p.mu.Lock()
	rec := p.sandboxes[id]
	rec.forgotten = true
	p.sandboxes[id] = rec
	p.mu.Unlock()
}

// stateEvent maps an observed container state to its event; a created
// container that has not started yet is not news.
func stateEvent(s runtimeapi.ContainerState) (Type, bool) {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return ContainerStarted, true
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return ContainerDied, true
	case runtimeapi.ContainerState_CONTAINER_UNKNOWN:
		return ContainerChanged, true
	}
	return 0, false
}

// Observe feeds one event of the runtime's stream into the diff and returns
// the PLEG event it means, if any.
func (p *PLEG) Observe(ev *runtimeapi.ContainerEventResponse) (Event, bool) {
	var st *runtimeapi.ContainerStatus
	for _, s := range ev.ContainersStatuses {
		if s.Id == ev.ContainerId {
			st = s
		}
	}
	var labels map[string]string
	if st != nil {
		labels = st.Labels
	} else if ev.PodSandboxStatus != nil {
		labels = ev.PodSandboxStatus.Labels
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old, had := p.seen[ev.ContainerId]
	uid, name := p.identify(labels)
	if uid == "" && had {
		uid, name = old.uid, old.name
	}
	if uid == "" {
		return Event{}, false
	}
	var rec containerRecord
	switch ev.ContainerEventType {
	case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
		if !had || old.gone {
			return Event{}, false
		}
		p.seq++
		old.gone, old.seq = true, p.seq
		p.seen[ev.ContainerId] = old // a tombstone, so a stale relist does not revive it
		return Event{UID: uid, Type: ContainerRemoved, ContainerID: ev.ContainerId, Name: old.name, Status: st}, true
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		rec = containerRecord{uid: uid, name: name, state: runtimeapi.ContainerState_CONTAINER_RUNNING}
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		rec = containerRecord{uid: uid, name: name, state: runtimeapi.ContainerState_CONTAINER_EXITED}
	case runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT:
		rec = containerRecord{uid: uid, name: name, state: runtimeapi.ContainerState_CONTAINER_CREATED}
	default:
		return Event{}, false
	}
	p.seq++
	rec.seq = p.seq
	if had && old.state == rec.state {
		p.seen[ev.ContainerId] = rec
		return Event{}, false
	}
	p.seen[ev.ContainerId] = rec
	t, ok := stateEvent(rec.state)
	if !ok {
		return Event{}, false
	}
	return Event{UID: uid, Type: t, ContainerID: ev.ContainerId, Name: name, Status: st}, true
}

// Forget drops a container from the observation, e.g. after the engine
// removed it itself; a later relist then reports nothing for it.
func (p *PLEG) Forget(id string) {
	p.mu.Lock()
	if rec, ok := p.seen[id]; ok && !rec.gone {
		p.seq++
		rec.gone, rec.seq = true, p.seq
		p.seen[id] = rec // a tombstone until a relist that began later confirms
	}
	p.mu.Unlock()
}

// Healthy returns nil while the last successful relist is less than three
// minutes old.
func (p *PLEG) Healthy() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := p.clock.Since(p.lastOK); d > UnhealthyAfter {
		if p.lastErr != nil {
			return fmt.Errorf("%w: no successful relist for %s: %w", ErrUnhealthy, d.Round(time.Second), p.lastErr)
		}
		return fmt.Errorf("%w: no successful relist for %s", ErrUnhealthy, d.Round(time.Second))
	}
	return nil
}

// Seed records what recovery found in the runtime as observed, before the
// first relist, so that the containers and sandboxes of pods that ran
// before a restart are not reported as news.
func (p *PLEG) Seed(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sb := range sandboxes {
		if uid, _ := p.identify(sb.Labels); uid != "" {
			p.sandboxes[sb.Id] = sandboxRecord{uid: uid, ready: sb.State == runtimeapi.PodSandboxState_SANDBOX_READY}
		}
	}
	for _, c := range containers {
		if uid, name := p.identify(c.Labels); uid != "" {
			p.seen[c.Id] = containerRecord{uid: uid, name: name, state: c.State}
		}
	}
}

// Known returns the pod UIDs of every sandbox and container recorded,
// including containers the stream reported deleted that no relist has
// confirmed gone yet (what may still be in the runtime).
func (p *PLEG) Known() map[types.UID]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[types.UID]bool, len(p.sandboxes)+len(p.seen))
	for _, r := range p.sandboxes {
		out[r.uid] = true
	}
	for _, r := range p.seen {
		out[r.uid] = true
	}
	return out
}

// Period is the relist interval: 1 s, or 10 s while the event stream runs.
func (p *PLEG) Period() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.evented {
		return EventedRelistPeriod
	}
	return RelistPeriod
}

// SetEvented tells whether the runtime's event stream runs (the relist
// then slows to EventedRelistPeriod).
func (p *PLEG) SetEvented(on bool) {
	p.mu.Lock()
	p.evented = on
	p.mu.Unlock()
}
