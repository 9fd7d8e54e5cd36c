package engine

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
	relistPeriod         = 1 * time.Second
	eventedRelistPeriod  = 10 * time.Second
	relistUnhealthyAfter = 3 * time.Minute
)

// errPLEGUnhealthy is wrapped by Healthy's error.
var errPLEGUnhealthy = errors.New("PLEG is not healthy")

// plegType is what happened to a container between two observations.
type plegType uint8

const (
	containerStarted plegType = iota
	containerDied
	containerRemoved
	containerChanged
	sandboxDied // the pod's sandbox is not ready or gone
)

func (t plegType) String() string {
	return [...]string{"ContainerStarted", "ContainerDied", "ContainerRemoved", "ContainerChanged", "SandboxDied"}[t]
}

// plegEvent is one container or sandbox change of one speclet pod.
type plegEvent struct {
	UID         types.UID
	Type        plegType
	ContainerID string
	SandboxID   string // for sandboxDied
	Name        string // container name (from speclet's label)
	// Status is the container's full status when the source had it: the
	// event stream always has it, a relist never (the worker then reads it
	// with ContainerStatus when it records the exit).
	Status *runtimeapi.ContainerStatus
}

// containerRecord is what the PLEG remembers of a container.
type containerRecord struct {
	uid   types.UID
	name  string
	state runtimeapi.ContainerState
	seq   uint64 // observation number: newer than a relist's list means the list is stale for it
	gone  bool   // the stream reported it deleted; kept until a relist confirms
}

// pleg turns the runtime's container states into per-pod events: a relist
// diffs ListContainers with the previous observation, and the runtime's event
// stream (GetContainerEvents) feeds the same diff when the runtime offers it.
// Both paths update one record so no change is reported twice.
type pleg struct {
	rt    cri.Runtime
	clock clock.PassiveClock

	mu        sync.Mutex
	seen      map[string]containerRecord // container id -> record
	sandboxes map[string]sandboxRecord   // sandbox id -> record
	seq       uint64                     // counts observations from the event stream
	lastOK    time.Time
	lastErr   error
	evented   bool
}

func newPLEG(rt cri.Runtime, c clock.PassiveClock) *pleg {
	return &pleg{rt: rt, clock: c, seen: map[string]containerRecord{}, sandboxes: map[string]sandboxRecord{}, lastOK: c.Now()}
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
func (p *pleg) Relist(ctx context.Context) ([]plegEvent, error) {
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
	var evs []plegEvent
	now := make(map[string]struct{}, len(cs))
	for _, c := range cs {
		uid := podUIDOf(c.Labels)
		if uid == "" {
			continue
		}
		now[c.Id] = struct{}{}
		rec := containerRecord{uid: uid, name: c.Labels[LabelContainerName], state: c.State, seq: startSeq}
		old, had := p.seen[c.Id]
		if had && (old.state == rec.state && !old.gone || old.seq > startSeq) {
			continue
		}
		p.seen[c.Id] = rec
		if t, ok := stateEvent(rec.state); ok {
			evs = append(evs, plegEvent{UID: uid, Type: t, ContainerID: c.Id, Name: rec.name})
		}
	}
	for id, rec := range p.seen {
		if _, ok := now[id]; !ok && rec.seq <= startSeq {
			delete(p.seen, id)
			if !rec.gone {
				evs = append(evs, plegEvent{UID: rec.uid, Type: containerRemoved, ContainerID: id, Name: rec.name})
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
func (p *pleg) relistSandboxes(ctx context.Context) ([]plegEvent, error) {
	sbs, err := p.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		return nil, fmt.Errorf("relist sandboxes: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var evs []plegEvent
	now := make(map[string]struct{}, len(sbs))
	for _, sb := range sbs {
		uid := podUIDOf(sb.Labels)
		if uid == "" {
			continue
		}
		now[sb.Id] = struct{}{}
		ready := sb.State == runtimeapi.PodSandboxState_SANDBOX_READY
		old, had := p.sandboxes[sb.Id]
		if had && old.ready == ready {
			continue
		}
		p.sandboxes[sb.Id] = sandboxRecord{uid: uid, ready: ready, forgotten: old.forgotten}
		if !ready && (!had || old.ready) && !old.forgotten {
			evs = append(evs, plegEvent{UID: uid, Type: sandboxDied, SandboxID: sb.Id})
		}
	}
	for id, rec := range p.sandboxes {
		if _, ok := now[id]; !ok {
			delete(p.sandboxes, id)
			if rec.ready && !rec.forgotten {
				evs = append(evs, plegEvent{UID: rec.uid, Type: sandboxDied, SandboxID: id})
			}
		}
	}
	return evs, nil
}

// UIDs returns the pod UIDs of the speclet sandboxes and containers in the
// last relist.
func (p *pleg) UIDs() map[types.UID]bool {
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
func (p *pleg) ForgetSandbox(id string) {
	p.mu.Lock()
	rec := p.sandboxes[id]
	rec.forgotten = true
	p.sandboxes[id] = rec
	p.mu.Unlock()
}

// stateEvent maps an observed container state to its event; a created
// container that has not started yet is not news.
func stateEvent(s runtimeapi.ContainerState) (plegType, bool) {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return containerStarted, true
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return containerDied, true
	case runtimeapi.ContainerState_CONTAINER_UNKNOWN:
		return containerChanged, true
	}
	return 0, false
}

// Observe feeds one event of the runtime's stream into the diff and returns
// the PLEG event it means, if any.
func (p *pleg) Observe(ev *runtimeapi.ContainerEventResponse) (plegEvent, bool) {
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
	uid := podUIDOf(labels)
	name := ""
	if st != nil {
		name = st.Labels[LabelContainerName]
	}
	if uid == "" && had {
		uid, name = old.uid, old.name
	}
	if uid == "" {
		return plegEvent{}, false
	}
	var rec containerRecord
	switch ev.ContainerEventType {
	case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
		if !had || old.gone {
			return plegEvent{}, false
		}
		p.seq++
		old.gone, old.seq = true, p.seq
		p.seen[ev.ContainerId] = old // a tombstone, so a stale relist does not revive it
		return plegEvent{UID: uid, Type: containerRemoved, ContainerID: ev.ContainerId, Name: old.name, Status: st}, true
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		rec = containerRecord{uid: uid, name: name, state: runtimeapi.ContainerState_CONTAINER_RUNNING}
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		rec = containerRecord{uid: uid, name: name, state: runtimeapi.ContainerState_CONTAINER_EXITED}
	case runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT:
		rec = containerRecord{uid: uid, name: name, state: runtimeapi.ContainerState_CONTAINER_CREATED}
	default:
		return plegEvent{}, false
	}
	p.seq++
	rec.seq = p.seq
	if had && old.state == rec.state {
		p.seen[ev.ContainerId] = rec
		return plegEvent{}, false
	}
	p.seen[ev.ContainerId] = rec
	t, ok := stateEvent(rec.state)
	if !ok {
		return plegEvent{}, false
	}
	return plegEvent{UID: uid, Type: t, ContainerID: ev.ContainerId, Name: name, Status: st}, true
}

// Forget drops a container from the observation, e.g. after the engine
// removed it itself; a later relist then reports nothing for it.
func (p *pleg) Forget(id string) {
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
func (p *pleg) Healthy() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d := p.clock.Since(p.lastOK); d > relistUnhealthyAfter {
		if p.lastErr != nil {
			return fmt.Errorf("%w: no successful relist for %s: %w", errPLEGUnhealthy, d.Round(time.Second), p.lastErr)
		}
		return fmt.Errorf("%w: no successful relist for %s", errPLEGUnhealthy, d.Round(time.Second))
	}
	return nil
}

// Period is the relist interval: 1 s, or 10 s while the event stream runs.
func (p *pleg) Period() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.evented {
		return eventedRelistPeriod
	}
	return relistPeriod
}

func (p *pleg) setEvented(on bool) {
	p.mu.Lock()
	p.evented = on
	p.mu.Unlock()
}
