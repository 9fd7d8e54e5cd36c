// The pod phase users see, from the containers' views.

package engine

import (
	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/spec/podphase"
)

// podPhase is the phase of the view: the facts podphase.Of reads (the same
// function `speclet spec verify` evaluates on the model's states; see
// spec/system.hcl's phase block), taken from the container views. Ephemeral
// containers are no part of it.
func podPhase(pod *v1.Pod, v *podView) v1.PodPhase {
	p := podphase.Pod{Terminating: v.Terminating, Terminated: v.Terminated}
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		p.Policy = podphase.OnFailure
	case v1.RestartPolicyNever:
		p.Policy = podphase.Never
	}
	p.Containers = make([]podphase.Container, 0, len(v.Inits)+len(v.Containers))
	for i := range v.Inits {
		kind := podphase.Init
		if v.Inits[i].Sidecar {
			kind = podphase.Sidecar
		}
		p.Containers = append(p.Containers, phaseFacts(kind, &v.Inits[i]))
	}
	for i := range v.Containers {
		p.Containers = append(p.Containers, phaseFacts(podphase.Regular, &v.Containers[i]))
	}
	return v1.PodPhase(podphase.Of(p))
}

// phaseFacts reads a container view as the phase sees it: running (also
// while stopping), exited (its status shows the exit, as its state or, while
// it waits for the next instance, as its lastState), or not started.
func phaseFacts(kind podphase.Kind, c *containerView) podphase.Container {
	f := podphase.Container{Kind: kind}
	switch {
	case c.Phase == phaseRunning:
		f.State = podphase.Runs
	case c.Phase == phaseTerminated:
		f.State = podphase.Exited
		f.Failed = c.Current == nil || c.Current.ExitCode != 0
	case c.Last != nil:
		f.State = podphase.Exited
		f.Failed = c.Last.ExitCode != 0
	}
	return f
}
