package podstatus

import (
	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/spec/podphase"
)

// PodPhase is the phase of the view: the facts podphase.Of reads (the same
// function `speclet spec verify` evaluates on the model's states; see
// spec/system.hcl's phase block), taken from the container views. Ephemeral
// containers are no part of it.
func PodPhase(pod *v1.Pod, v *View) v1.PodPhase {
	return v1.PodPhase(podphase.Of(phaseInput(pod, v, nil)))
}

// phaseInput is the facts of the view that podphase.Of and
// podphase.ConditionsOf read (spec/system.hcl's phase and conditions
// blocks say how the model reads them from the machines' states); gates
// are the messages of the readiness gates that are not True.
func phaseInput(pod *v1.Pod, v *View, gates []string) podphase.Pod {
	p := podphase.Pod{Terminating: v.Terminating, Terminated: v.Terminated, SandboxReady: v.SandboxReady, Gates: gates}
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		p.Policy = podphase.OnFailure
	case v1.RestartPolicyNever:
		p.Policy = podphase.Never
	}
	p.Containers = make([]podphase.Container, 0, len(v.Inits)+len(v.Containers))
	for i := range v.Inits {
		p.Containers = append(p.Containers, phaseFacts(Kind(true, v.Inits[i].Sidecar), &v.Inits[i]))
	}
	for i := range v.Containers {
		p.Containers = append(p.Containers, phaseFacts(podphase.Regular, &v.Containers[i]))
	}
	return p
}

// phaseFacts reads a container view as the phase sees it: running (also
// while stopping), exited (its status shows the exit, as its state or, while
// it waits for the next instance, as its lastState), or not started.
//
// The conditions' facts: its name and readiness as the view says, whether
// a sidecar ever started (a start time is known, or it runs) and whether
// its status shows it running or terminated.
func phaseFacts(kind podphase.Kind, c *Container) podphase.Container {
	f := podphase.Container{Kind: kind, Name: c.Name, Ready: c.Ready,
		Ran:   !c.StartedAt.IsZero() || c.Phase == Running,
		Shown: c.Phase == Running || c.Phase == Terminated}
	switch {
	case c.Phase == Running:
		f.State = podphase.Runs
	case c.Phase == Terminated:
		f.State = podphase.Exited
		f.Failed = c.Current == nil || c.Current.ExitCode != 0
	case c.Last != nil:
		f.State = podphase.Exited
		f.Failed = c.Last.ExitCode != 0
	}
	return f
}

// Kind is the kind of an init container (sidecar: with restartPolicy
// Always) or a regular one.
func Kind(init, sidecar bool) podphase.Kind {
	switch {
	case sidecar:
		return podphase.Sidecar
	case init:
		return podphase.Init
	}
	return podphase.Regular
}
