package engine

import (
	"fmt"
	"runtime"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/admission"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/fsm"
)

// The engine's side of admission (engine/admission decides): a pod that
// does not fit the node is refused when its UID is first declared, and
// fails with kubelet's reason without starting; the other pods keep
// running. The decision is made once, in the sync loop; the pod machine's
// guard admission_refused reads it.

// RuntimeClasses resolves a RuntimeClass name to its runtime handler
// (admission.RuntimeClasses).
type RuntimeClasses = admission.RuntimeClasses

// refusal is why a pod was refused admission.
type refusal = admission.Refusal

// admitLocked gathers the admission input and decides; e.mu is held.
// Adopted pods (already running when speclet started) are not refused,
// but their runtime handler is resolved. A panic of the decision is an
// UnexpectedAdmissionError of that pod, never a crash of the node.
func (e *Engine) admitLocked(pod *v1.Pod, adopted bool) (handler string, r *refusal) {
	defer func() {
		if p := recover(); p != nil {
			handler, r = "", &refusal{Reason: admission.ReasonUnexpectedAdmissionError, Message: fmt.Sprintf("Unexpected error while admitting the pod: %v", p)}
		}
	}()
	if adopted {
		h, _ := admission.RuntimeHandler(pod, e.cfg.RuntimeClasses)
		return h, nil
	}
	if m := e.cfg.Eviction; m != nil {
		// kubelet's eviction admit handler runs before the predicates:
		// under node pressure (Config.Eviction) BestEffort pods are
		// refused under MemoryPressure, and every non-critical pod under
		// DiskPressure or PIDPressure, with reason Evicted.
		if ok, msg := m.Admit(pod, config.IsStatic(pod)); !ok {
			return "", &refusal{Reason: ReasonEvicted, Message: msg}
		}
	}
	var active []*v1.Pod
	if d := e.cfg.Devices; d != nil && wantsDevices(pod) {
		active = e.activePodsLocked()
		keep := active
		if !e.sourcesReady() {
			// The pods admitted so far are not all the node has (a
			// start): no other pod's devices are freed.
			keep = nil
		}
		if err := d.Allocate(e.ctx(), pod, keep); err != nil {
			return "", admission.AllocateFailed(err)
		}
		defer func() {
			if r != nil {
				d.Forget(string(pod.UID))
			}
		}()
	}
	in := admission.Input{Node: e.nodeObject(false), Allocatable: e.cfg.Allocatable, RuntimeClasses: e.cfg.RuntimeClasses, Sysctls: e.cfg.Sysctls, MaxPods: e.cfg.MaxPods,
		Features: e.features.Load(),
		Active: func() []*v1.Pod {
			if active == nil {
				active = e.activePodsLocked()
			}
			return active
		}}
	handler, r = admission.Admit(pod, in)
	if r != nil && r.Reason == admission.ReasonNodeAffinity && e.cfg.Node != nil {
		// kubelet's generalFilter: when node affinity is the only failure,
		// the Node is read afresh (labels may have just changed) and the
		// pod decided again.
		in.Node = e.nodeObject(true)
		handler, r = admission.Admit(pod, in)
	}
	return handler, r
}

// activePodsLocked lists the admitted pods that have not terminated (kubelet's
// GetActivePods for admission); e.mu is held. It is never nil.
func (e *Engine) activePodsLocked() []*v1.Pod {
	out := make([]*v1.Pod, 0, len(e.workers))
	for _, w := range e.workers {
		if w.Refusal() != nil || w.Pod() == nil {
			continue
		}
		if st := w.MachineState(); st == fsm.PodStateTerminated || st == fsm.PodStateFinished {
			continue
		}
		out = append(out, w.Pod())
	}
	return out
}

// nodeObject is the node admission matches pods against: Config.Node's
// (the Node object of the API server; read afresh when fresh) when it has
// one, else the node as speclet registers it (its name and the
// kubernetes.io/hostname, os and arch labels).
func (e *Engine) nodeObject(fresh bool) *v1.Node {
	if e.cfg.Node != nil {
		if n := e.cfg.Node(fresh); n != nil {
			return n
		}
	}
	n := &v1.Node{}
	n.Name = e.cfg.NodeName
	n.Labels = map[string]string{
		v1.LabelHostname:   e.cfg.NodeName,
		v1.LabelOSStable:   runtime.GOOS,
		v1.LabelArchStable: runtime.GOARCH,
	}
	return n
}
