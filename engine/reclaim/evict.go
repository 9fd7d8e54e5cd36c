package reclaim

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/eviction"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/fsm"
)

// kubelet's eviction manager on the node machine: every EvictionPeriod
// observe_signals measures the signals (Config.Signals) and asks the pure
// core (engine/eviction) what to do; a disk signal first gets node-level
// reclaim (the image GC path, with every unused image planned), and when
// the threshold is still met at the next pass, or for memory and PIDs at
// once, evict_pod kills the first pod of kubelet's ranking (Config.Pods).

// ObserveSignals reads the image filesystem's mount point (none when
// ImageFsInfo fails), measures the signals there and decides.
func (n *Node) ObserveSignals() op.Op {
	return op.ImageFsInfo(func(info *runtimeapi.ImageFsInfoResponse, err error) op.Op {
		mount := ""
		if err == nil && len(info.GetImageFilesystems()) > 0 {
			mount = info.GetImageFilesystems()[0].GetFsId().GetMountpoint()
		}
		return op.Host("Signals", mount, func(ctx context.Context) (eviction.Observations, error) {
			return n.cfg.Signals(ctx, mount)
		}, func(obs eviction.Observations, err error) op.Op {
			if err != nil {
				n.report(fsm.NodeEventObserveFailed)
				return op.Done(fmt.Errorf("eviction: %w", err))
			}
			n.decide(obs)
			return op.Done(nil)
		})
	})
}

// decide asks the eviction core what the observations obs call for and
// reports it: no_pressure, reclaim (a disk signal's first node-level
// reclaim) or pressure.
func (n *Node) decide(obs eviction.Observations) {
	d := n.cfg.Eviction.Observe(n.cfg.Clock.Now(), obs)
	n.decision = d
	if d.Signal == "" {
		n.reclaimed = map[string]bool{}
		n.report(fsm.NodeEventNoPressure)
		return
	}
	for sig := range n.reclaimed {
		if !containsString(d.Met, sig) {
			delete(n.reclaimed, sig)
		}
	}
	n.cfg.Log.Warn("Eviction manager: attempting to reclaim", "resourceName", resourceName(d.Signal), "signal", d.Signal,
		"available", d.Available, "threshold", d.Threshold, "hard", d.Hard)
	// kubelet records it at every pass that finds a threshold met, before
	// node-level reclaim (the recorder's aggregation counts repeats).
	n.nodeEvent(v1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim "+resourceName(d.Signal))
	if diskSignal(d.Signal) && !n.reclaimed[d.Signal] {
		n.reclaimed[d.Signal] = true
		n.reclaimAll = true
		n.report(fsm.NodeEventReclaim)
		return
	}
	n.report(fsm.NodeEventPressure)
}

func containsString(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

func diskSignal(sig string) bool {
	return strings.HasPrefix(sig, "nodefs.") || strings.HasPrefix(sig, "imagefs.") || strings.HasPrefix(sig, "containerfs.")
}

func resourceName(sig string) string {
	switch {
	case sig == "memory.available" || sig == eviction.AllocatableMemory:
		return "memory"
	case sig == "pid.available":
		return "pids"
	case strings.HasSuffix(sig, "inodesFree"):
		return "inodes"
	}
	return "ephemeral-storage"
}

// EvictedPodTerminating: the pod evicted last still has a worker whose pod
// machine is neither terminated nor finished (its memory or disk is not
// free yet).
func (n *Node) EvictedPodTerminating() bool {
	return n.lastEvicted != "" && n.cfg.Pods.Terminating(n.lastEvicted)
}

// EvictPod reads the pods' usage of the signal's resource and kills the
// first pod of the ranking for the decision's signal.
func (n *Node) EvictPod() op.Op {
	return n.podUsage(n.decision.Signal, func(usage map[types.UID]int64, err error) op.Op {
		if err != nil {
			return op.Done(fmt.Errorf("evict a pod: %w", err))
		}
		return op.Done(n.evict(usage))
	})
}

// evict kills the first pod of the ranking by usage.
func (n *Node) evict(usage map[types.UID]int64) error {
	d := n.decision
	var pods []eviction.PodUsage
	for _, pod := range n.cfg.Pods.Evictable() {
		pods = append(pods, eviction.PodUsage{Pod: pod, Static: config.IsStatic(pod), Usage: usage[pod.UID]})
	}
	ranked := eviction.Rank(d.Signal, pods)
	if len(ranked) == 0 {
		n.cfg.Log.Error("Eviction manager: unable to evict any pod from the node", "signal", d.Signal)
		return fmt.Errorf("eviction: no pod to evict for %s (static, mirror and critical pods are never evicted)", d.Signal)
	}
	victim := ranked[0].Pod
	grace := int64(1) // kubelet's immediateEvictionGracePeriodSeconds for a hard threshold
	if !d.Hard {
		grace = n.cfg.EvictionMaxPodGrace
		if grace < 0 {
			grace = n.cfg.PodGrace(victim)
		}
		grace = max(min(grace, n.cfg.PodGrace(victim)), 1)
	}
	msg := d.Message()
	n.cfg.Log.Warn("Eviction manager: pod is evicted successfully", "pod", victim.Namespace+"/"+victim.Name, "uid", victim.UID,
		"signal", d.Signal, "grace", grace, "message", msg)
	n.lastEvicted = victim.UID
	// kubelet's evictPod records the eviction on the pod (reason Evicted,
	// the status message) before the kill.
	if f := n.cfg.PodEvent; f != nil {
		f(victim, v1.EventTypeWarning, "Evicted", msg)
	}
	n.cfg.Pods.Evict(victim.UID, grace, msg)
	return nil
}

// podUsage hands then each running pod's use of the signal's resource:
// the sum over its containers of the memory working set (memory) or the
// writable layer (disk); nothing is measured for PIDs (the ranking then
// goes by priority alone).
func (n *Node) podUsage(signal string, then func(map[types.UID]int64, error) op.Op) op.Op {
	out := map[types.UID]int64{}
	if signal == "pid.available" {
		return then(out, nil)
	}
	return op.ListContainerStats(&runtimeapi.ContainerStatsFilter{}, func(stats []*runtimeapi.ContainerStats, err error) op.Op {
		if err != nil {
			return then(nil, err)
		}
		for _, s := range stats {
			uid, _ := n.cfg.Identify(s.GetAttributes().GetLabels())
			if uid == "" {
				continue
			}
			if signal == "memory.available" || signal == eviction.AllocatableMemory {
				out[uid] += int64(s.GetMemory().GetWorkingSetBytes().GetValue())
			} else {
				out[uid] += int64(s.GetWritableLayer().GetUsedBytes().GetValue())
			}
		}
		return then(out, nil)
	})
}
