package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/speclet/speclet/engine/containergc"
	"github.com/speclet/speclet/fsm"
)

// RemoveDeadContainers is container GC across pods (kubelet's
// containerGC.evictContainers, run every ContainerGCPeriod when
// --maximum-dead-containers is set): it lists speclet's containers, plans
// with engine/containergc and removes the planned dead instances, oldest
// first. It never removes what the pod machines use: a running instance,
// the newest instance of a container, or its newest dead one (lastState,
// logs --previous). The pod workers learn of each removal from the PLEG
// (ContainerRemoved of an older instance) and forget the instance. A failed
// removal does not stop the others; the pass then reports
// container_gc_failed.
func (n *nodeReclaim) RemoveDeadContainers(ctx context.Context) error {
	e := n.e
	cs, err := e.rt.ListContainers(ctx, nil)
	if err != nil {
		n.report(fsm.NodeEventContainerGcFailed)
		return fmt.Errorf("container GC: %w", err)
	}
	var all []containergc.Instance
	names := map[string]string{} // id -> pod UID/container name, attempt
	for _, c := range cs {
		uid := podUIDOf(c.Labels)
		if uid == "" {
			continue // not speclet's
		}
		name := c.Labels[LabelContainerName]
		all = append(all, containergc.Instance{ID: c.Id, Unit: containergc.Unit{PodUID: string(uid), Name: name},
			Attempt: c.GetMetadata().GetAttempt(), Created: time.Unix(0, c.CreatedAt), State: c.State})
		names[c.Id] = fmt.Sprintf("%s/%s attempt %d", uid, name, c.GetMetadata().GetAttempt())
	}
	gc := e.cfg.ContainerGC
	plan := containergc.Plan(e.clock.Now(), containergc.Policy{MinAge: gc.MinAge, MaxPerContainer: gc.MaxPerContainer,
		MaxContainers: *gc.MaxContainers}, all)
	var errs []error
	removed := 0
	for _, id := range plan {
		e.log.Debug("Removing dead container", "container", names[id], "containerID", id)
		if err := removeContainer(ctx, e.rt, names[id], id); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	if removed > 0 {
		e.log.Info("Container garbage collection removed dead containers", "removed", removed,
			"maximum-dead-containers", *gc.MaxContainers, "maximum-dead-containers-per-container", gc.MaxPerContainer)
	}
	if len(errs) > 0 {
		n.report(fsm.NodeEventContainerGcFailed)
		return fmt.Errorf("container GC: %w", errors.Join(errs...))
	}
	n.report(fsm.NodeEventContainersCollected)
	return nil
}
