package engine

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/containergc"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/pods"
	"github.com/speclet/speclet/engine/reclaim"
	"github.com/speclet/speclet/engine/runtimepods"
)

// kubelet's periods of the node machine's passes.
const (
	DefaultImageGCPeriod     = reclaim.DefaultImageGCPeriod
	DefaultContainerGCPeriod = reclaim.DefaultContainerGCPeriod
	DefaultEvictionPeriod    = reclaim.DefaultEvictionPeriod
)

// Statfs is FsStat on a real node: the filesystem's size and what an
// unprivileged user may still write (f_bavail, as cadvisor reports it).
func Statfs(path string) (capacity, available uint64, err error) { return reclaim.Statfs(path) }

// newNodeMachine is the node machine (engine/reclaim) over the engine's
// runtime, settings and pods, on its clock, with its observers' sinks.
func newNodeMachine(e *Engine) *reclaim.Machine {
	cfg := e.cfg
	gc := cfg.ContainerGC
	policy := containergc.Policy{MinAge: gc.MinAge, MaxPerContainer: gc.MaxPerContainer}
	gcPeriod := time.Duration(0) // no node-wide limit: no such pass
	if gc.MaxContainers != nil {
		policy.MaxContainers, gcPeriod = *gc.MaxContainers, cfg.ContainerGCPeriod
	}
	return reclaim.NewMachine(reclaim.Config{
		Runtime: e.rt, Clock: e.clock, Log: e.log, Identify: runtimepods.Identify,
		PodEvent: func(pod *v1.Pod, eventType, reason, message string) {
			if r := cfg.Events; r != nil {
				r.Event(pod, "", eventType, reason, message)
			}
		},
		NodeEvent: func(eventType, reason, message string) { e.nodeEvent(eventType, reason, "%s", message) },
		Policy:    cfg.NodePolicy, Pods: enginePods{e}, PodGrace: pods.Grace,
		ContainerGC: policy, ContainerGCPeriod: gcPeriod,
	}, e.clock, &e.sinks)
}

// NodeHistory returns the node machine's last transitions, oldest first.
func (e *Engine) NodeHistory() []Transition {
	return e.node.History()
}

// Step is a transition a machine took, as Config.Steps is told of it
// (engine/observe).
type Step = observe.Step
