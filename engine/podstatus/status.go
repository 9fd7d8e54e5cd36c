// Package podstatus computes the status a pod shows (kubelet's
// generateAPIPodStatus and its status manager's rules) from a View: what
// the engine read from the pod's machines and the runtime. It is pure: the
// same view and previous status give the same status. The phase and the
// conditions are spec/podphase's functions, which `speclet spec verify`
// evaluates on the model's states too.
package podstatus

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/admission"
	"github.com/speclet/speclet/engine/resources"
	"github.com/speclet/speclet/spec/podphase"
)

// Reasons and messages the status shows, kubelet's words.
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonCompleted         = "Completed"
	ReasonError             = "Error"
	// ReasonEvicted is the reason of a pod the eviction manager evicted.
	ReasonEvicted = "Evicted"
	// ReasonDeadlineExceeded: the pod ran past activeDeadlineSeconds.
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	MessageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// ContainerPhase is the coarse state a container's machine state maps to.
type ContainerPhase uint8

const (
	Waiting ContainerPhase = iota
	Running
	Terminated
)

// Termination is one finished run of a container.
type Termination struct {
	ContainerID string
	ExitCode    int32
	Reason      string
	Message     string
	StartedAt   time.Time
	FinishedAt  time.Time
}

// Container is what status needs to know about one container; the engine
// fills it from the container's machine state and the runtime's last report.
type Container struct {
	Name    string
	Image   string
	ImageID string
	Init    bool // an init container (sidecars included)
	Sidecar bool // an init container with restartPolicy Always

	Phase          ContainerPhase
	WaitingReason  string
	WaitingMessage string
	ContainerID    string // the current (or last) runtime container
	StartedAt      time.Time
	Current        *Termination // set when Phase == Terminated
	Last           *Termination // the run before the current one
	RestartCount   int32
	Ready          bool
	Started        bool // the startup probe succeeded, or there is none
	// VolumeMounts is status.volumeMounts (podspec.VolumeMountStatuses);
	// User the user the runtime reported (UserOf), nil when it did not.
	VolumeMounts []v1.VolumeMountStatus
	User         *v1.ContainerUser
}

// UserOf is kubelet's status.containerStatuses[].user from a CRI
// ContainerStatus's user (toKubeContainerUser, convertContainerStatusUser):
// nil when the runtime reported none, its Linux uid, gid and supplemental
// groups when it has them.
func UserOf(u *runtimeapi.ContainerUser) *v1.ContainerUser {
	if u == nil {
		return nil
	}
	out := &v1.ContainerUser{}
	if l := u.GetLinux(); l != nil {
		out.Linux = &v1.LinuxContainerUser{UID: l.GetUid(), GID: l.GetGid(), SupplementalGroups: l.GetSupplementalGroups()}
	}
	return out
}

// View is what status needs to know about one pod.
type View struct {
	Pod          *v1.Pod
	SandboxReady bool
	PodIP        string
	HostIP       string
	StartTime    time.Time
	Containers   []Container        // regular containers, in spec order
	Inits        []Container        // init containers, in spec order
	Ephemerals   []Container        // ephemeral containers, in spec order
	Terminating  bool               // the worker is killing the pod
	Terminated   bool               // every container is stopped for good
	RuntimeName  string             // container IDs read "<RuntimeName>://<id>"
	Refused      *admission.Refusal // refused admission: Failed with its reason
	Evicted      string             // the eviction message: Failed, reason Evicted
	// DeadlineExceeded: ran past activeDeadlineSeconds: Failed, reason
	// DeadlineExceeded.
	DeadlineExceeded bool
	// Static: the pod comes from a manifest, not the API server (its phase
	// is not forced terminal when it terminates, as kubelet leaves it).
	Static bool
}

// Compute derives a pod's status from its view. A pod that reached
// Succeeded or Failed stays there (prev is the status last published): phase
// never goes backwards, as kubelet's status manager enforces.
func Compute(prev *v1.PodStatus, v *View, now time.Time) v1.PodStatus {
	runtime := v.RuntimeName
	if runtime == "" {
		runtime = "cri"
	}
	pod := v.Pod
	if v.Refused != nil {
		// kubelet's rejectPod: only the phase, reason, message and QoS class.
		return v1.PodStatus{QOSClass: qosClass(pod), Phase: v1.PodFailed, Reason: v.Refused.Reason,
			Message: "Pod was rejected: " + v.Refused.Message}
	}
	st := v1.PodStatus{HostIP: v.HostIP, PodIP: v.PodIP}
	if prev != nil && prev.QOSClass != "" {
		// A pod's QoS class never changes (the API server refuses a
		// resize that would change it): keep the one computed first.
		st.QOSClass = prev.QOSClass
	} else {
		st.QOSClass = qosClass(pod)
	}
	if v.HostIP != "" {
		st.HostIPs = []v1.HostIP{{IP: v.HostIP}}
	}
	if v.PodIP != "" {
		st.PodIPs = []v1.PodIP{{IP: v.PodIP}}
	}
	if !v.StartTime.IsZero() {
		t := metav1.NewTime(v.StartTime)
		st.StartTime = &t
	}
	for i := range v.Inits {
		st.InitContainerStatuses = append(st.InitContainerStatuses, containerStatus(&v.Inits[i], runtime))
	}
	for i := range v.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, containerStatus(&v.Containers[i], runtime))
	}
	// kubelet sorts the regular containers' statuses by name
	// (kubetypes.SortedContainerStatuses); init containers keep spec order.
	sort.SliceStable(st.ContainerStatuses, func(i, j int) bool { return st.ContainerStatuses[i].Name < st.ContainerStatuses[j].Name })
	// Ephemeral containers: their own list, in spec order; never part of
	// the phase or the conditions.
	for i := range v.Ephemerals {
		st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses, containerStatus(&v.Ephemerals[i], runtime))
	}
	st.Phase = PodPhase(pod, v)
	if prev != nil && (prev.Phase == v1.PodSucceeded || prev.Phase == v1.PodFailed) {
		st.Phase = prev.Phase
	}
	if v.Evicted != "" && st.Phase != v1.PodSucceeded {
		// kubelet's eviction status: Failed at once, reason Evicted.
		st.Phase, st.Reason, st.Message = v1.PodFailed, ReasonEvicted, v.Evicted
	} else if v.DeadlineExceeded && st.Phase != v1.PodSucceeded {
		st.Phase, st.Reason, st.Message = v1.PodFailed, ReasonDeadlineExceeded, MessageDeadlineExceeded
	}
	if v.Terminated {
		terminated(&st, pod, v.Static)
	}

	ts := metav1.NewTime(now)
	// A condition keeps its lastTransitionTime while its status stays.
	cond := func(t v1.PodConditionType, c podphase.Condition) v1.PodCondition {
		pc := v1.PodCondition{Type: t, Status: v1.ConditionFalse, Reason: c.Reason, Message: c.Message, LastTransitionTime: ts}
		if c.True {
			pc.Status = v1.ConditionTrue
		}
		if prev != nil {
			for _, p := range prev.Conditions {
				if p.Type == t && p.Status == pc.Status {
					pc.LastTransitionTime = p.LastTransitionTime
				}
			}
		}
		return pc
	}
	pc := podphase.ConditionsOf(phaseInput(pod, v, unreadyGates(pod)), podphase.Phase(st.Phase))
	st.Conditions = []v1.PodCondition{
		cond(v1.PodReadyToStartContainers, pc.ReadyToStartContainers),
		cond(v1.PodInitialized, pc.Initialized),
		cond(v1.PodReady, pc.Ready),
		cond(v1.ContainersReady, pc.ContainersReady),
		cond(v1.PodScheduled, podphase.Condition{True: true}),
	}
	return st
}

// Kubelet's words for a container that never showed an exit when its pod
// terminated.
const (
	ReasonContainerStatusUnknown = "ContainerStatusUnknown"
	MessageContainerNotLocated   = "The container could not be located when the pod was terminated"
	exitCodeContainerNotLocated  = 137
)

// terminated applies kubelet's status manager's TerminatePod to the status
// of a pod every container of which stopped for good: once the pod has
// initialized, a regular container whose status is not terminated shows
// terminated, ContainerStatusUnknown, exit code 137; so does each init
// container up to the last one that ever started; and a pod that is not
// static ends Failed when its phase is Pending or Running (a pod deleted
// while it waited for its image never ran, yet it ends).
func terminated(st *v1.PodStatus, pod *v1.Pod, static bool) {
	unknown := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		Reason: ReasonContainerStatusUnknown, Message: MessageContainerNotLocated, ExitCode: exitCodeContainerNotLocated}}
	if initialized(st, pod) {
		for i := range st.ContainerStatuses {
			if st.ContainerStatuses[i].State.Terminated == nil {
				st.ContainerStatuses[i].State = *unknown.DeepCopy()
			}
		}
	}
	inits := st.InitContainerStatuses
	n := 0
	for i := len(inits) - 1; i >= 0; i-- {
		if inits[i].State.Waiting == nil || inits[i].LastTerminationState.Terminated != nil {
			n = i + 1
			break
		}
	}
	if n == 0 && len(inits) > 0 {
		n = 1 // kubelet's initializedContainers always returns the first
	}
	for i := 0; i < n; i++ {
		if inits[i].State.Terminated == nil {
			inits[i].State = *unknown.DeepCopy()
		}
	}
	if !static && (st.Phase == v1.PodPending || st.Phase == v1.PodRunning) {
		st.Phase = v1.PodFailed
	}
}

// initialized is kubelet's hasPodInitialized over the status: no init
// containers, or a regular container left waiting or shows an exit, or the
// last init container completed with 0 (a sidecar: runs and started).
func initialized(st *v1.PodStatus, pod *v1.Pod) bool {
	if len(st.InitContainerStatuses) == 0 {
		return true
	}
	for _, cs := range st.ContainerStatuses {
		if cs.LastTerminationState.Terminated != nil || cs.State.Waiting == nil {
			return true
		}
	}
	last := st.InitContainerStatuses[len(st.InitContainerStatuses)-1]
	sidecar := false
	for _, c := range pod.Spec.InitContainers {
		if c.Name == last.Name {
			sidecar = c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		}
	}
	if sidecar {
		return last.State.Running != nil && last.Started != nil && *last.Started
	}
	if t := last.LastTerminationState.Terminated; t != nil && t.ExitCode == 0 {
		return true
	}
	if t := last.State.Terminated; t != nil && t.ExitCode == 0 {
		return true
	}
	return false
}

// unreadyGates are kubelet's messages for the pod's readiness gates whose
// condition (set in the API by others, and read from the pod's status as
// the source last delivered it) is missing or not True.
func unreadyGates(pod *v1.Pod) []string {
	var msgs []string
	for _, g := range pod.Spec.ReadinessGates {
		var c *v1.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == g.ConditionType {
				c = &pod.Status.Conditions[i]
			}
		}
		switch {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case c.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), c.Status))
		}
	}
	return msgs
}

func containerStatus(c *Container, runtime string) v1.ContainerStatus {
	cs := v1.ContainerStatus{
		Name:         c.Name,
		Image:        c.Image,
		ImageID:      c.ImageID,
		ContainerID:  c.ContainerID,
		RestartCount: c.RestartCount,
		Ready:        c.Ready,
		VolumeMounts: c.VolumeMounts,
		User:         c.User,
	}
	started := c.Phase == Running && c.Started
	cs.Started = &started
	switch c.Phase {
	case Running:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}
	case Terminated:
		cs.State.Terminated = terminatedState(c.Current, runtime)
	default:
		reason := c.WaitingReason
		if reason == "" {
			reason = ReasonContainerCreating
		}
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: c.WaitingMessage}
	}
	if c.Last != nil {
		cs.LastTerminationState.Terminated = terminatedState(c.Last, runtime)
	}
	if cs.ContainerID != "" && !strings.Contains(cs.ContainerID, "://") {
		cs.ContainerID = runtime + "://" + cs.ContainerID
	}
	return cs
}

func terminatedState(t *Termination, runtime string) *v1.ContainerStateTerminated {
	if t == nil {
		return &v1.ContainerStateTerminated{Reason: ReasonError, ExitCode: 137}
	}
	reason := t.Reason
	if reason == "" {
		reason = ReasonCompleted
		if t.ExitCode != 0 {
			reason = ReasonError
		}
	}
	id := t.ContainerID
	if id != "" && !strings.Contains(id, "://") {
		id = runtime + "://" + id
	}
	return &v1.ContainerStateTerminated{
		ExitCode: t.ExitCode, Reason: reason, Message: t.Message,
		StartedAt: metav1.NewTime(t.StartedAt), FinishedAt: metav1.NewTime(t.FinishedAt),
		ContainerID: id,
	}
}

// qosClass is the pod's QoS class, as kubelet computes it.
func qosClass(pod *v1.Pod) v1.PodQOSClass { return resources.QOSClass(pod) }
