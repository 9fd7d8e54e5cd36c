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
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        c.id,
		ContainerEventType: t,
		CreatedAt:          r.now(),
		PodSandboxStatus:   c.sandbox.status(),
		ContainersStatuses: c.sandbox.containerStatuses(),
	}
	if t == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT {
		// c is no longer in its sandbox; report its last status too.
		ev.ContainersStatuses = append(ev.ContainersStatuses, c.status())
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
func (r *Runtime) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	ctx := stream.Context()
	if err := r.before(ctx, "GetContainerEvents"); err != nil {
		return err
	}
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
