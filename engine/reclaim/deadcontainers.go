package reclaim

import (
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/containergc"
	"github.com/speclet/speclet/engine/op"
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
func (n *Node) RemoveDeadContainers() op.Op {
	return op.ListContainers(nil, func(cs []*runtimeapi.Container, err error) op.Op {
		if err != nil {
			n.report(fsm.NodeEventContainerGcFailed)
			return op.Done(fmt.Errorf("container GC: %w", err))
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
		plan := containergc.Plan(n.cfg.Clock.Now(), n.cfg.ContainerGC, all)
		return n.removeDead(plan, names, 0, nil)
	})
}

// removeDead removes the planned instances from the i-th on, after
// removed of those before and the failures errs; names names them for
// logs and errors.
func (n *Node) removeDead(plan []string, names map[string]string, removed int, errs []error) op.Op {
	if len(plan) > 0 {
		id := plan[0]
		n.cfg.Log.Debug("Removing dead container", "container", names[id], "containerID", id)
		return op.RemoveContainer(id, func(err error) op.Op {
			if err != nil && !cri.IsNotFound(err) {
				return n.removeDead(plan[1:], names, removed, append(errs, fmt.Errorf("remove container %q: %w", names[id], err)))
			}
			return n.removeDead(plan[1:], names, removed+1, errs)
		})
	}
	gc := n.cfg.ContainerGC
	if removed > 0 {
		n.cfg.Log.Info("Container garbage collection removed dead containers", "removed", removed,
			"maximum-dead-containers", gc.MaxContainers, "maximum-dead-containers-per-container", gc.MaxPerContainer)
	}
	if len(errs) > 0 {
		n.report(fsm.NodeEventContainerGcFailed)
		return op.Done(fmt.Errorf("container GC: %w", errors.Join(errs...)))
	}
	n.report(fsm.NodeEventContainersCollected)
	return op.Done(nil)
}
