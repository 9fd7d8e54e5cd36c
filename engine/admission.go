package engine

import (
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/resources"
	"github.com/speclet/speclet/fsm"
)

// This file is kubelet's resource admission (lifecycle.PredicateAdmitHandler
// with the scheduler's fit predicate): a pod whose requests do not fit the
// node's allocatable beside the requests of the admitted pods that are not
// terminated is refused when its UID is first declared, and fails with
// reason OutOf<resource> (OutOfcpu, OutOfmemory) without starting. Before
// that, under node pressure (Config.Eviction) kubelet's eviction admission
// refuses BestEffort pods under MemoryPressure and every non-critical pod
// under DiskPressure or PIDPressure, with reason Evicted. The
// other pods keep running. The decision is made once, in the sync loop
// (one goroutine, so two pods never both take the last room), and the pod
// machine's guard admission_refused reads it.

// refusal is why a pod was refused admission.
type refusal struct {
	Reason, Message string
}

// admitLocked decides the admission of pod; e.mu is held. Adopted pods
// (already running when speclet started) are not re-admitted.
func (e *Engine) admitLocked(pod *v1.Pod) *refusal {
	if m := e.cfg.Eviction; m != nil {
		// kubelet's eviction admit handler, before the resource fit.
		if ok, msg := m.Admit(pod, config.IsStatic(pod)); !ok {
			return &refusal{Reason: ReasonEvicted, Message: msg}
		}
	}
	alloc := e.cfg.Allocatable
	if alloc == nil {
		return nil
	}
	want := resources.Requests(pod)
	used := v1.ResourceList{}
	for _, w := range e.workers {
		if w.refusal != nil || w.pod == nil {
			continue
		}
		w.mu.Lock()
		st := w.podState
		w.mu.Unlock()
		if st == fsm.PodStateTerminated || st == fsm.PodStateFinished {
			continue
		}
		for name, q := range resources.Requests(w.pod) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, string(name))
	}
	sort.Strings(names) // cpu before memory, as kubelet reports the first
	for _, n := range names {
		name := v1.ResourceName(n)
		capQ, ok := alloc[name]
		if !ok {
			continue // a resource the node does not account (e.g. ephemeral-storage unset)
		}
		req, u := want[name], used[name]
		total := u.DeepCopy()
		total.Add(req)
		if req.Sign() > 0 && total.Cmp(capQ) > 0 {
			return &refusal{
				Reason:  "OutOf" + n,
				Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d", n, amount(name, req), amount(name, u), amount(name, capQ)),
			}
		}
	}
	return nil
}

// amount is a quantity as kubelet prints it: millicores for CPU, the value
// otherwise.
func amount(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// AdmissionRefused: the pod was refused admission when first declared.
func (s *podState) AdmissionRefused() bool { return s.w.refusal != nil }
