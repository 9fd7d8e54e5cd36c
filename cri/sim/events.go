package sim

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// subscriber is one GetContainerEvents stream. Events are queued without
// blocking the runtime; a subscriber that falls eventBuffer events behind is
// ended (lagged) rather than silently missing events.
type subscriber struct {
	ch     chan *runtimeapi.ContainerEventResponse
	lagged chan struct{}
}

// emit sends an event about c to every subscriber. r.mu is held, so events
// are queued in the order the changes happened.
func (r *Runtime) emit(c *container, t runtimeapi.ContainerEventType) {
	if len(r.subs) == 0 {
		return
	}
	var gone *runtimeapi.ContainerStatus
	if t == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
		// c is no longer in its sandbox; report its last status too.
		gone = c.status()
	}
	r.send(c.id, c.sandbox, t, gone)
}

// emitSandboxStopped sends the event containerd (1.7 and later) sends when a
// sandbox's pause process exits: CONTAINER_STOPPED_EVENT whose ContainerId
// is the sandbox's id, with the sandbox's status (NOTREADY) and its
// containers' statuses. The CRI has no sandbox event type. r.mu is held.
func (r *Runtime) emitSandboxStopped(s *sandbox) {
	if len(r.subs) == 0 {
		return
	}
	r.send(s.id, s, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, nil)
}

// send queues an event about id, a container of sb or sb itself, for every
// subscriber; gone, when set, is the last status of a removed container.
// r.mu is held.
func (r *Runtime) send(id string, sb *sandbox, t runtimeapi.ContainerEventType, gone *runtimeapi.ContainerStatus) {
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        id,
		ContainerEventType: t,
		CreatedAt:          r.now(),
		PodSandboxStatus:   sb.status(),
		ContainersStatuses: sb.containerStatuses(),
	}
	if gone != nil {
		ev.ContainersStatuses = append(ev.ContainersStatuses, gone)
	}
	for s := range r.subs {
		select {
		case s.ch <- ev:
		default:
			close(s.lagged)
			delete(r.subs, s)
		}
	}
}

// GetContainerEvents streams CONTAINER_CREATED, _STARTED, _STOPPED and
// _DELETED events, each with the status of the container's sandbox and of
// its containers, from the moment of the call until the client goes away.
// A sandbox killed behind the agent's back (KillSandbox) sends a
// CONTAINER_STOPPED event with the sandbox's id, as containerd does.
func (r *Runtime) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	ctx := stream.Context()
	s := &subscriber{ch: make(chan *runtimeapi.ContainerEventResponse, r.eventBuffer), lagged: make(chan struct{})}
	r.mu.Lock()
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.subs, s)
		r.mu.Unlock()
	}()
	for {
		select {
		case ev := <-s.ch:
			if err := stream.Send(ev); err != nil {
				return err
			}
		case <-s.lagged:
			// Deliver what was queued before the overflow, then end.
			for {
				select {
				case ev := <-s.ch:
					if err := stream.Send(ev); err != nil {
						return err
					}
				default:
					return status.Errorf(codes.ResourceExhausted, "event subscriber fell %d events behind; events were dropped", r.eventBuffer)
				}
			}
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// Subscribers returns the number of open GetContainerEvents streams. Tests
// wait for it before making changes they expect events for.
func (r *Runtime) Subscribers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.subs)
}
