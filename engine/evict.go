package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/eviction"
	"github.com/speclet/speclet/engine/nodestats"
	"github.com/speclet/speclet/fsm"
)

// This file is kubelet's eviction manager wired to the node machine
// (spec/node.hcl): every EvictionPeriod observe_signals measures the
// signals (Config.Signals) and asks the pure core (engine/eviction) what to
// do; a disk signal first gets node-level reclaim (the image GC path, with
// every unused image planned), and when the threshold is still met at the
// next pass, or for memory and PIDs at once, evict_pod kills the first pod
// of kubelet's ranking through its pod machine.

// DefaultEvictionPeriod is kubelet's eviction monitoring period.
const DefaultEvictionPeriod = 10 * time.Second

// evictionOrder is what evict_pod tells a pod worker.
type evictionOrder struct {
	grace   int64
	message string
}

// Pressure is the eviction manager's node conditions (MemoryPressure,
// DiskPressure, PIDPressure), all false without one.
func (e *Engine) Pressure() map[v1.NodeConditionType]bool {
	if e.cfg.Eviction == nil {
		return map[v1.NodeConditionType]bool{v1.NodeMemoryPressure: false, v1.NodeDiskPressure: false, v1.NodePIDPressure: false}
	}
	return e.cfg.Eviction.Conditions()
}

// defaultSignals measures the host (engine/nodestats): nodefs on the root
// directory, imagefs on the image filesystem's mountpoint.
func (e *Engine) defaultSignals(_ context.Context, imageFs string) (eviction.Observations, error) {
	return nodestats.Host{}.Measure(e.cfg.RootDir, imageFs)
}

// ObserveSignals measures the signals and decides.
func (n *nodeReclaim) ObserveSignals(ctx context.Context) error {
	e := n.e
	mount := ""
	if info, err := e.rt.ImageFsInfo(ctx); err == nil && len(info.GetImageFilesystems()) > 0 {
		mount = info.GetImageFilesystems()[0].GetFsId().GetMountpoint()
	}
	obs, err := e.cfg.Signals(ctx, mount)
	if err != nil {
		n.report(fsm.NodeEventObserveFailed)
		return fmt.Errorf("eviction: %w", err)
	}
	d := e.cfg.Eviction.Observe(e.clock.Now(), obs)
	n.decision = d
	if d.Signal == "" {
		n.reclaimed = map[string]bool{}
		n.report(fsm.NodeEventNoPressure)
		return nil
	}
	for sig := range n.reclaimed {
		if !containsString(d.Met, sig) {
			delete(n.reclaimed, sig)
		}
	}
	e.log.Warn("Eviction manager: attempting to reclaim", "resourceName", resourceName(d.Signal), "signal", d.Signal,
		"available", d.Available, "threshold", d.Threshold, "hard", d.Hard)
	// kubelet records it at every pass that finds a threshold met, before
	// node-level reclaim (the recorder's aggregation counts repeats).
	e.nodeEvent(eventWarning, "EvictionThresholdMet", "Attempting to reclaim %s", resourceName(d.Signal))
	if diskSignal(d.Signal) && !n.reclaimed[d.Signal] {
		n.reclaimed[d.Signal] = true
		n.reclaimAll = true
		n.report(fsm.NodeEventReclaim)
		return nil
	}
	n.report(fsm.NodeEventPressure)
	return nil
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
func (n *nodeReclaim) EvictedPodTerminating() bool {
	uid := n.lastEvicted
	if uid == "" {
		return false
	}
	n.e.mu.RLock()
	w := n.e.workers[uid]
	n.e.mu.RUnlock()
	if w == nil {
		return false
	}
	w.mu.Lock()
	st := w.podState
	w.mu.Unlock()
	return st != fsm.PodStateTerminated && st != fsm.PodStateFinished
}

// EvictPod kills the first pod of the ranking for the decision's signal.
func (n *nodeReclaim) EvictPod(ctx context.Context) error {
	e := n.e
	d := n.decision
	type cand struct {
		w   *podWorker
		pod *v1.Pod
	}
	e.mu.RLock()
	var cands []cand
	for _, w := range e.workers {
		w.mu.Lock()
		st, pub := w.podState, w.pub
		w.mu.Unlock()
		if w.refusal != nil || pub == nil || w.pod == nil {
			continue
		}
		switch st {
		case fsm.PodStateTerminating, fsm.PodStateTerminated, fsm.PodStateFinished, fsm.PodStateCompleted:
			continue
		}
		if pub.Status.Phase != v1.PodRunning && pub.Status.Phase != v1.PodPending {
			continue
		}
		cands = append(cands, cand{w, pub})
	}
	e.mu.RUnlock()
	usage, err := n.podUsage(ctx, d.Signal)
	if err != nil {
		return fmt.Errorf("evict a pod: %w", err)
	}
	byUID := map[types.UID]*podWorker{}
	var pods []eviction.PodUsage
	for _, c := range cands {
		byUID[c.pod.UID] = c.w
		pods = append(pods, eviction.PodUsage{Pod: c.pod, Static: config.IsStatic(c.pod), Usage: usage[c.pod.UID]})
	}
	ranked := eviction.Rank(d.Signal, pods)
	if len(ranked) == 0 {
		e.log.Error("Eviction manager: unable to evict any pod from the node", "signal", d.Signal)
		return fmt.Errorf("eviction: no pod to evict for %s (static, mirror and critical pods are never evicted)", d.Signal)
	}
	victim := ranked[0].Pod
	grace := int64(1) // kubelet's immediateEvictionGracePeriodSeconds for a hard threshold
	if !d.Hard {
		grace = e.cfg.EvictionMaxPodGrace
		if grace < 0 {
			grace = podGrace(victim)
		}
		grace = max(min(grace, podGrace(victim)), 1)
	}
	msg := d.Message()
	e.log.Warn("Eviction manager: pod is evicted successfully", "pod", victim.Namespace+"/"+victim.Name, "uid", victim.UID,
		"signal", d.Signal, "grace", grace, "message", msg)
	n.lastEvicted = victim.UID
	// kubelet's evictPod records the eviction on the pod (reason Evicted,
	// the status message) before the kill.
	if r := e.cfg.Events; r != nil {
		r.Event(victim, "", eventWarning, "Evicted", msg)
	}
	byUID[victim.UID].post(input{kind: inputEvict, evict: &evictionOrder{grace: grace, message: msg}})
	return nil
}

// podUsage is each running pod's use of the signal's resource: the sum
// over its containers of the memory working set (memory) or the writable
// layer (disk); nothing is measured for PIDs (the ranking then goes by
// priority alone).
func (n *nodeReclaim) podUsage(ctx context.Context, signal string) (map[types.UID]int64, error) {
	out := map[types.UID]int64{}
	if signal == "pid.available" {
		return out, nil
	}
	stats, err := n.e.rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return nil, err
	}
	for _, s := range stats {
		uid := types.UID(s.GetAttributes().GetLabels()[LabelPodUID])
		if uid == "" {
			continue
		}
		if signal == "memory.available" || signal == eviction.AllocatableMemory {
			out[uid] += int64(s.GetMemory().GetWorkingSetBytes().GetValue())
		} else {
			out[uid] += int64(s.GetWritableLayer().GetUsedBytes().GetValue())
		}
	}
	return out, nil
}
