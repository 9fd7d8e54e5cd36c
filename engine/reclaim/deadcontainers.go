package reclaim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/speclet/speclet/cri"
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
func (n *Node) RemoveDeadContainers(ctx context.Context) error {
	cs, err := n.cfg.Runtime.ListContainers(ctx, nil)
	if err != nil {
		n.report(fsm.NodeEventContainerGcFailed)
		return fmt.Errorf("container GC: %w", err)
	}
	var all []containergc.Instance
	names := map[string]string{} // id -> pod UID/container name, attempt
	for _, c := range cs {
		uid, name := n.cfg.Identify(c.Labels)
		if uid == "" {
			continue // not the agent's
		}
		all = append(all, containergc.Instance{ID: c.Id, Unit: containergc.Unit{PodUID: string(uid), Name: name},
			Attempt: c.GetMetadata().GetAttempt(), Created: time.Unix(0, c.CreatedAt), State: c.State})
		names[c.Id] = fmt.Sprintf("%s/%s attempt %d", uid, name, c.GetMetadata().GetAttempt())
	}
	gc := n.cfg.ContainerGC
	plan := containergc.Plan(n.cfg.Clock.Now(), gc, all)
	var errs []error
	removed := 0
	for _, id := range plan {
		n.cfg.Log.Debug("Removing dead container", "container", names[id], "containerID", id)
		if err := n.cfg.Runtime.RemoveContainer(ctx, id); err != nil && !cri.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %q: %w", names[id], err))
			continue
		}
		removed++
	}
	if removed > 0 {
		n.cfg.Log.Info("Container garbage collection removed dead containers", "removed", removed,
			"maximum-dead-containers", gc.MaxContainers, "maximum-dead-containers-per-container", gc.MaxPerContainer)
	}
	if len(errs) > 0 {
		n.report(fsm.NodeEventContainerGcFailed)
		return fmt.Errorf("container GC: %w", errors.Join(errs...))
	}
	n.report(fsm.NodeEventContainersCollected)
	return nil
}
