// The pod phase users see, from the containers' views.

package engine

import (
	v1 "k8s.io/api/core/v1"
)

// podPhase is kubelet's getPhase over the view: Pending until the init
// containers are done and every regular container ran; Running while one runs
// or will be restarted; Succeeded/Failed when all stopped for good.
func podPhase(pod *v1.Pod, v *podView) v1.PodPhase {
	policy := pod.Spec.RestartPolicy
	if policy == "" {
		policy = v1.RestartPolicyAlways
	}
	for i := range v.Inits {
		c := &v.Inits[i]
		if c.Sidecar {
			continue
		}
		failed := c.Phase == phaseTerminated && c.Current != nil && c.Current.ExitCode != 0
		if failed && policy == v1.RestartPolicyNever {
			return v1.PodFailed
		}
		ok := c.Phase == phaseTerminated && c.Current != nil && c.Current.ExitCode == 0
		if !ok {
			if len(v.Containers) > 0 && v.Containers[0].Phase == phaseWaiting && v.Containers[0].ContainerID == "" {
				return v1.PodPending
			}
		}
	}
	var running, waiting, stopped, succeeded int
	// Sidecars count as kubelet's getPhase counts restartable init
	// containers: a running one keeps the pod Running (so a pod whose
	// regular containers all completed stays Running until its sidecars
	// have stopped), one that never ran keeps it Pending, and a stopped one
	// counts for nothing.
	for i := range v.Inits {
		c := &v.Inits[i]
		if !c.Sidecar {
			continue
		}
		switch {
		case c.Phase == phaseRunning:
			running++
		case c.Phase == phaseWaiting && c.Last == nil:
			waiting++
		}
	}
	for i := range v.Containers {
		c := &v.Containers[i]
		switch c.Phase {
		case phaseRunning:
			running++
		case phaseTerminated:
			stopped++
			if c.Current != nil && c.Current.ExitCode == 0 {
				succeeded++
			}
		default:
			if c.Last != nil {
				stopped++
				if c.Last.ExitCode == 0 {
					succeeded++
				}
			} else {
				waiting++
			}
		}
	}
	switch {
	case waiting > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped > 0:
		if v.Terminated || !v.Terminating {
			switch policy {
			case v1.RestartPolicyAlways:
				if !v.Terminated {
					return v1.PodRunning
				}
			case v1.RestartPolicyOnFailure:
				if stopped != succeeded && !v.Terminated {
					return v1.PodRunning
				}
			}
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	}
	return v1.PodPending
}
