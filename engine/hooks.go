package engine

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/handlers"
)

// Lifecycle hooks (kubelet kuberuntime_container.go startContainer and
// killContainer):
//
//   - postStart runs right after StartContainer; the container counts as
//     started only when it returned. When it fails the container is killed
//     (its preStop runs too, as in kubelet) and start_failed is raised with
//     the waiting reason PostStartHookError; the restart policy decides.
//   - preStop runs once per running instance before its StopContainer,
//     bounded by the grace period; the seconds it took are subtracted from
//     the grace given to StopContainer, which gets at least
//     minGraceAfterPreStop seconds. A failing preStop is logged and the stop
//     goes on.
//
// The handlers run in engine/handlers: exec (CRI ExecSync; a non-zero exit
// code is a failure), httpGet (only no answer is a failure; the host
// defaults to the pod IP) and sleep (on the engine's clock). tcpSocket is
// not a valid hook and is ignored.

// ReasonPostStartHookError is the waiting reason of a container whose
// postStart hook failed, kubelet's ErrPostStartHook.
const ReasonPostStartHookError = "PostStartHookError"

// minGraceAfterPreStop is kubelet's minimumGracePeriodInSeconds: a container
// whose preStop ate its grace period still gets this long after SIGTERM.
const minGraceAfterPreStop = 2

func (c *ctrState) postStartHook() *v1.LifecycleHandler {
	if c.spec == nil || c.spec.Lifecycle == nil {
		return nil
	}
	return c.spec.Lifecycle.PostStart
}

func (c *ctrState) preStopHook() *v1.LifecycleHandler {
	if c.spec == nil || c.spec.Lifecycle == nil {
		return nil
	}
	return c.spec.Lifecycle.PreStop
}

// hookTarget is the current instance as handlers run against it.
func (c *ctrState) hookTarget() handlers.Target {
	return handlers.Target{Runtime: c.p.e.rt, Clock: c.p.e.clock, ID: c.id, Name: c.name, PodIP: c.p.sandbox.PodIP(), Spec: c.spec}
}

// runPreStop runs preStop hook h against target, the current instance,
// bounded by grace seconds (stopContainer decides whether it runs: once
// per started instance with a grace period left). It returns the grace
// left for StopContainer.
func (c *ctrState) runPreStop(ctx context.Context, target handlers.Target, h *v1.LifecycleHandler, grace int64) int64 {
	clk := c.p.e.clock
	start := clk.Now()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- target.Hook(hctx, "PreStop", h, time.Duration(grace)*time.Second) }()
	t := clk.NewTimer(time.Duration(grace) * time.Second)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			c.p.e.log.Warn("FailedPreStopHook", "pod", c.p.key(), "container", c.name, "err", err)
			c.event(eventWarning, "FailedPreStopHook", "PreStopHook failed: %v", err)
		}
	case <-t.C():
		msg := fmt.Sprintf("PreStop hook of container %q did not finish within %ds", c.name, grace)
		c.p.e.log.Warn("FailedPreStopHook", "pod", c.p.key(), "container", c.name, "err", msg)
		c.event(eventWarning, "FailedPreStopHook", "%s", msg)
	}
	left := grace - int64(clk.Since(start)/time.Second)
	return max(left, minGraceAfterPreStop)
}
