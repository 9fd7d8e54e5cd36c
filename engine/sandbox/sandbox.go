// Package sandbox is the sandbox machine's work (spec/sandbox.hcl): the
// sandboxes the runtime holds for one pod, as the guards and actions the
// generated fsm.SandboxMachine calls. The engine owns the machine itself
// (its fire loop, observers and history) and binds it to a Sandbox, which
// reads the pod and reports the outcome of each action through its Pod.
//
// Contracts:
//   - Only the pod's worker goroutine calls a Sandbox's methods, except
//     Config, which the goroutines of one parallel delivery (the pod's
//     containers being created) may call at once; a Sandbox keeps no lock.
//   - A sandbox is never forgotten: its ID is kept as soon as RunPodSandbox
//     returned, and every sandbox the pod had is stopped and removed with
//     the pod (IDs, oldest first).
//   - An action's outcome is the event it raises through Pod.Raise; its
//     error is also kept (Err) for the pod action that delivered the event.
package sandbox

import (
	"log/slog"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/fsm"
)

// Pod is what a Sandbox reads of its pod and node, and how it reports.
type Pod interface {
	// Spec is the pod's current spec.
	Spec() *v1.Pod
	// Key is the pod's namespace/name, for errors and logs.
	Key() string
	// Done: every regular container of the pod finished and may not
	// restart (the pod machine's pod_done).
	Done() bool
	// Ran: a container of the pod has run (started, or its failed start
	// recorded; an instance only created has not).
	Ran() bool
	// BuildConfig builds the RunPodSandbox config of the attempt-th
	// sandbox from the pod and the node; rebuilt: for a sandbox that
	// exists already, whose DNS warnings were recorded when it was made.
	BuildConfig(attempt uint32, rebuilt bool) (*runtimeapi.PodSandboxConfig, error)
	// RuntimeHandler is the handler of the pod's runtime class.
	RuntimeHandler() string
	// Cgroups is the node's pod cgroups, or nil without them.
	Cgroups() Cgroups
	// Runtime runs the actions' CRI calls.
	Runtime() cri.Runtime
	// Logger is where failures are logged.
	Logger() *slog.Logger
	// Event records a Kubernetes event about the pod, with the message
	// format formats with args (not formatted when no one records events).
	Event(eventType, reason, format string, args ...any)
	// Raise reports an action's outcome to the machine.
	Raise(ev fsm.SandboxEvent)
	// Stopping tells the PLEG that the engine stops the sandbox id itself:
	// its stop is not news.
	Stopping(id string)
}

// Cgroups removes a pod's cgroup, the CgroupParent of its sandbox, once
// every sandbox of the pod is removed (the pod machine's ensure_pod_cgroup
// made it).
type Cgroups interface {
	Remove(uid types.UID) error
}

// Sandbox is one pod's sandboxes, and the guards and actions of its
// sandbox machine (fsm.SandboxGuards, fsm.SandboxActions). The zero value
// is a pod with no sandbox yet; Bind gives it its pod.
type Sandbox struct {
	pod Pod

	id  string   // the current sandbox ("" before the first RunPodSandbox returned)
	ids []string // every sandbox the pod had, oldest first
	// cfg is the config RunPodSandbox got, kept only until the end of the
	// sync that made the sandbox (DropConfig); Config builds it again for
	// a later CRI call that takes it.
	cfg     *runtimeapi.PodSandboxConfig
	attempt uint32 // the current sandbox's attempt (its metadata)
	podIP   string
	// err is the error of the action the last delivery ran (ClearErr).
	err error
}

var _ fsm.SandboxGuards = (*Sandbox)(nil)

// Bind gives s its pod.
func (s *Sandbox) Bind(p Pod) { s.pod = p }

// ID is the current sandbox ("" before the first RunPodSandbox returned).
func (s *Sandbox) ID() string { return s.id }

// IDs are every sandbox the pod had, oldest first. The caller must not
// change them.
func (s *Sandbox) IDs() []string { return s.ids }

// PodIP is the current sandbox's IP ("" on the host's network).
func (s *Sandbox) PodIP() string { return s.podIP }

// Err is the error of the action the last delivery ran, which the pod
// action that delivered it (sync_pod, stop_sandbox) returns for its log
// line; nothing decides on it.
func (s *Sandbox) Err() error { return s.err }

// ClearErr forgets Err, before a delivery.
func (s *Sandbox) ClearErr() { s.err = nil }

// DropConfig forgets the config RunPodSandbox got, at the end of the sync
// that made the sandbox.
func (s *Sandbox) DropConfig() { s.cfg = nil }

// RecreateForbidden: no container would start in a new sandbox, as
// kubelet's computePodActions decides: restartPolicy Never and a container
// of the pod has run, or the pod is done (every regular container finished
// and may not restart, e.g. OnFailure after exit 0).
//
// A container whose only instance was created and never started has not
// run. kubelet counts any container status here, so a Never pod whose
// sandbox died before its container started stays Pending under kubelet
// with no sandbox for good; speclet gives it its one run in a new sandbox,
// since it knows that no start was tried. After a restart it does not know:
// a Never pod adopted with such a container and no ready sandbox has that
// instance taken as dead (worker's ctrState.adopt), so it ran.
func (s *Sandbox) RecreateForbidden() bool {
	if s.pod.Done() {
		return true
	}
	return s.pod.Spec().Spec.RestartPolicy == v1.RestartPolicyNever && s.pod.Ran()
}

// Config is the current sandbox's config for the CRI calls that take one
// (CreateContainer, PullImage): the one RunPodSandbox got during the sync
// that made the sandbox, otherwise built again from the pod as kubelet
// builds it for every sync. A config that cannot be built again is logged
// and nil: the sandbox runs already, its containers are created with what
// the runtime has. It is safe to call from the goroutines of one parallel
// delivery: the worker sets and drops cfg outside them.
func (s *Sandbox) Config() *runtimeapi.PodSandboxConfig {
	if s.cfg != nil {
		return s.cfg
	}
	cfg, err := s.pod.BuildConfig(s.attempt, true)
	if err != nil {
		s.pod.Logger().Warn("rebuild sandbox config", "pod", s.pod.Key(), "err", err)
		return nil
	}
	return cfg
}

// Adopt takes over the pod's sandboxes from a previous run: the newest
// ready one becomes the current sandbox; the others are kept to be removed
// with the pod. It returns the ready sandbox (or nil), and the state the
// machine resumes in: ready with one; dead when the newest is no longer
// ready, so the next sync decides as for a death it saw
// (recreate_forbidden keeps a completed pod's outcome instead of running
// it again); the initial state when the pod had none.
func (s *Sandbox) Adopt(a *runtimepods.Pod) (*runtimeapi.PodSandbox, fsm.SandboxState) {
	for i := len(a.Sandboxes) - 1; i >= 0; i-- {
		s.ids = append(s.ids, a.Sandboxes[i].Id)
	}
	ready := a.ReadySandbox()
	if ready == nil {
		if len(a.Sandboxes) == 0 {
			return nil, fsm.SandboxInitialState
		}
		// The newest sandbox is no longer ready: a pod that completed
		// (its sandbox stopped, its dead containers kept) or whose
		// sandbox died.
		s.id = a.Sandboxes[0].Id
		return nil, fsm.SandboxStateDead
	}
	// The adopted sandbox's config is built again when a CRI call needs
	// it (Config).
	s.id, s.attempt = ready.Id, ready.GetMetadata().GetAttempt()
	return ready, fsm.SandboxStateReady
}
