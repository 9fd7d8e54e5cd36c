// Package admission is kubelet's pod admission (canAdmitPod with
// lifecycle.PredicateAdmitHandler and the scheduler's AdmissionCheck) as one
// pure decision: whether a pod fits the node beside the admitted pods, and
// if not kubelet's reason and message. The engine gathers the input and
// decides once per pod UID, in its sync loop (one goroutine, so two pods
// never both take the last room or the same host port); the pod machine's
// guard admission_refused reads the result.
package admission

import (
	"fmt"
	"runtime"
	"sort"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/resources"
)

// Admission reasons: kubelet's (OutOf<resource>, the scheduler plugins'
// names, UnexpectedAdmissionError) and speclet's RuntimeClassNotFound.
const (
	ReasonNodeAffinity         = "NodeAffinity"
	ReasonNodeName             = "NodeName"
	ReasonNodePorts            = "NodePorts"
	ReasonRuntimeClassNotFound = "RuntimeClassNotFound"
	ReasonPodOSNotSupported    = "PodOSNotSupported"

	ReasonPodOSSelectorNodeLabelDoesNotMatch   = "PodOSSelectorNodeLabelDoesNotMatch"
	ReasonUnexpectedAdmissionError             = "UnexpectedAdmissionError"
	ReasonSupplementalGroupsPolicyNotSupported = "SupplementalGroupsPolicyNotSupported"
)

// The scheduler plugins' failure texts, which kubelet's refusal message
// quotes ("Predicate <Name> failed: <text>").
const (
	errNodeAffinity = "node(s) didn't match Pod's node affinity/selector"
	errNodeName     = "node(s) didn't match the requested node name"
	errNodePorts    = "node(s) didn't have free ports for the requested pod ports"
)

// RuntimeClasses resolves a RuntimeClass name to its runtime handler (the
// RuntimeClass API's handler field). An unknown name is an error for which
// apierrors.IsNotFound holds; any other error means the lookup itself
// failed.
type RuntimeClasses func(name string) (handler string, err error)

// Refusal is why a pod was refused admission.
type Refusal struct {
	Reason, Message string
}

// Input is everything the admission decision reads.
type Input struct {
	// Node is the node as the control plane knows it (name, labels).
	Node *v1.Node
	// Allocatable is node allocatable; nil: resources are not checked.
	Allocatable v1.ResourceList
	// Active lists the admitted pods that have not terminated. It is
	// called only when a check needs them (a pods capacity, allocatable
	// and a pod that requests something, a pod with host ports), at most
	// once per decision; nil: there are none.
	Active func() []*v1.Pod
	// RuntimeClasses resolves runtimeClassName; nil: there is no
	// RuntimeClass API (speclet runs without --kubeconfig).
	RuntimeClasses RuntimeClasses
	// Sysctls is the node's sysctl allowlist; nil: sysctls are not checked.
	Sysctls *podspec.Sysctls
	// MaxPods is the node's pods capacity (--max-pods); 0: not checked.
	MaxPods int
	// Features is what the runtime says it supports (its last Status);
	// nil: nothing (not read yet).
	Features *podspec.RuntimeFeatures
}

// Admit decides whether pod may run on the node beside the active pods,
// in kubelet's order: the pods capacity (OutOfpods), resources
// (OutOf<resource>), required node affinity and nodeSelector
// (NodeAffinity), spec.nodeName (NodeName), host ports (NodePorts); an
// AppArmor profile the node cannot enforce (AppArmor);
// then the runtime class, whose handler it returns. Before them, as
// kubelet's admit handlers: the pod's OS (PodOSNotSupported,
// PodOSSelectorNodeLabelDoesNotMatch), what the node cannot run at all
// (FieldNotSupported, engine/podspec.Unsupported) and sysctls the node does
// not allow (SysctlForbidden). Only the
// first failure is reported, as kubelet reports it. It is pure: the
// caller gathers the input.
func Admit(pod *v1.Pod, in Input) (handler string, r *Refusal) {
	var active []*v1.Pod
	loaded := false
	activePods := func() []*v1.Pod {
		if !loaded && in.Active != nil {
			active = in.Active()
		}
		loaded = true
		return active
	}
	if r := fitsOS(pod); r != nil {
		return "", r
	}
	if r := fitsSupplementalGroupsPolicy(pod, in.Features); r != nil {
		return "", r
	}
	if fields := podspec.Unsupported(pod); len(fields) > 0 {
		return "", &Refusal{Reason: podspec.ReasonFieldNotSupported, Message: podspec.UnsupportedMessage(fields)}
	}
	if in.Sysctls != nil {
		if reason, msg, ok := in.Sysctls.Admit(pod); !ok {
			return "", &Refusal{Reason: reason, Message: msg}
		}
	}
	if in.MaxPods > 0 {
		// The scheduler's fit counts pods before every other resource.
		if n := len(activePods()); n+1 > in.MaxPods {
			return "", &Refusal{Reason: "OutOf" + string(v1.ResourcePods),
				Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: 1, used: %d, capacity: %d", v1.ResourcePods, n, in.MaxPods)}
		}
	}
	if r := fitsResources(pod, in.Allocatable, activePods); r != nil {
		return "", r
	}
	predicate := func(name, text string) *Refusal {
		return &Refusal{Reason: name, Message: fmt.Sprintf("Predicate %s failed: %s", name, text)}
	}
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(in.Node); err != nil {
		return "", &Refusal{Reason: ReasonUnexpectedAdmissionError,
			Message: fmt.Sprintf("GeneralPredicates failed due to %v, which is unexpected.", err)}
	} else if !ok {
		return "", predicate(ReasonNodeAffinity, errNodeAffinity)
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != in.Node.Name {
		return "", predicate(ReasonNodeName, errNodeName)
	}
	if !fitsPorts(pod, activePods) {
		return "", predicate(ReasonNodePorts, errNodePorts)
	}
	if reason, msg, ok := podspec.AppArmorAdmit(pod); !ok {
		return "", &Refusal{Reason: reason, Message: msg}
	}
	return RuntimeHandler(pod, in.RuntimeClasses)
}

// AllocateFailed is kubelet's refusal of a pod whose resources (device
// plugins' devices) could not be allocated: UnexpectedAdmissionError,
// "Allocate failed due to <err>, which is unexpected".
func AllocateFailed(err error) *Refusal {
	return &Refusal{Reason: ReasonUnexpectedAdmissionError, Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
}

// fitsOS is kubelet's OS admission: a pod labelled kubernetes.io/os with
// another OS than the node's (kubelet takes the node's OS from the running
// binary whatever its label says), and a spec.os that is not this OS, are
// refused.
func fitsOS(pod *v1.Pod) *Refusal {
	if want, ok := pod.Labels[v1.LabelOSStable]; ok && want != runtime.GOOS {
		return &Refusal{Reason: ReasonPodOSSelectorNodeLabelDoesNotMatch,
			Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != runtime.GOOS {
		return &Refusal{Reason: ReasonPodOSNotSupported, Message: "Failed to admit pod as the OS field doesn't match node OS"}
	}
	return nil
}

// fitsSupplementalGroupsPolicy is kubelet's
// rejectPodAdmissionBasedOnSupplementalGroupsPolicy (the feature is beta,
// on by default): a pod with supplementalGroupsPolicy Strict is refused
// unless the runtime supports the policy. kubelet reads the Node's
// status.features, which it sets from the runtime's Status; speclet reads
// the runtime's Status features themselves (also without an API server).
func fitsSupplementalGroupsPolicy(pod *v1.Pod, f *podspec.RuntimeFeatures) *Refusal {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.SupplementalGroupsPolicy == nil || *sc.SupplementalGroupsPolicy != v1.SupplementalGroupsPolicyStrict || f.SupportsSupplementalGroupsPolicy() {
		return nil
	}
	return &Refusal{Reason: ReasonSupplementalGroupsPolicyNotSupported,
		Message: fmt.Sprintf("SupplementalGroupsPolicy=%s is not supported in this node", v1.SupplementalGroupsPolicyStrict)}
}

// RuntimeHandler resolves the pod's runtimeClassName. kubelet resolves it
// when it creates the sandbox and, on an unknown name, retries with
// FailedCreatePodSandBox events; speclet decides at admission, so the pod
// fails at once with reason RuntimeClassNotFound. Without a RuntimeClass
// API (no --kubeconfig) a named class cannot be resolved and is refused
// the same way rather than run with the default handler (kubelet without
// an API client ignores the field). A lookup that fails for another reason
// is UnexpectedAdmissionError.
func RuntimeHandler(pod *v1.Pod, classes RuntimeClasses) (string, *Refusal) {
	name := ""
	if pod.Spec.RuntimeClassName != nil {
		name = *pod.Spec.RuntimeClassName
	}
	if name == "" {
		return "", nil
	}
	if classes == nil {
		return "", &Refusal{Reason: ReasonRuntimeClassNotFound,
			Message: fmt.Sprintf("RuntimeClass %q cannot be resolved: speclet runs without --kubeconfig (no RuntimeClass API)", name)}
	}
	h, err := classes(name)
	switch {
	case err == nil:
		return h, nil
	case apierrors.IsNotFound(err):
		return "", &Refusal{Reason: ReasonRuntimeClassNotFound, Message: err.Error()}
	default:
		return "", &Refusal{Reason: ReasonUnexpectedAdmissionError,
			Message: fmt.Sprintf("Unexpected error while looking up RuntimeClass %q: %v", name, err)}
	}
}

// fitsResources is the scheduler's noderesources fit against allocatable:
// the first resource (in name order: cpu before memory) whose request does
// not fit beside the active pods' requests.
func fitsResources(pod *v1.Pod, alloc v1.ResourceList, active func() []*v1.Pod) *Refusal {
	if alloc == nil {
		return nil
	}
	want := resources.Requests(pod)
	requests := false
	for name, q := range want {
		if _, ok := alloc[name]; ok && q.Sign() > 0 {
			requests = true
		}
	}
	if !requests {
		// Nothing it asks for can fail to fit: the others' requests
		// need not be summed.
		return nil
	}
	used := v1.ResourceList{}
	for _, p := range active() {
		for name, q := range resources.Requests(p) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, string(name))
	}
	sort.Strings(names)
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
			return &Refusal{
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

// hostPort is one (protocol, host IP, port) a pod takes on the node.
type hostPort struct {
	protocol, ip string
	port         int32
}

// hostPorts are the host ports the pod takes: those of its regular
// containers and of its sidecars (init containers that run for the pod's
// whole life), with kubelet's defaults (TCP, 0.0.0.0).
func hostPorts(pod *v1.Pod) []hostPort {
	var out []hostPort
	add := func(c *v1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := hostPort{protocol: string(p.Protocol), ip: p.HostIP, port: p.HostPort}
			if hp.protocol == "" {
				hp.protocol = string(v1.ProtocolTCP)
			}
			if hp.ip == "" {
				hp.ip = "0.0.0.0"
			}
			out = append(out, hp)
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return out
}

// fitsPorts is the scheduler's nodeports fit: no host port of pod is
// taken by an active pod on the same protocol and port, where 0.0.0.0
// conflicts with every address.
func fitsPorts(pod *v1.Pod, active func() []*v1.Pod) bool {
	want := hostPorts(pod)
	if len(want) == 0 {
		return true
	}
	for _, p := range active() {
		for _, used := range hostPorts(p) {
			for _, w := range want {
				if w.protocol == used.protocol && w.port == used.port &&
					(w.ip == used.ip || w.ip == "0.0.0.0" || used.ip == "0.0.0.0") {
					return false
				}
			}
		}
	}
	return true
}
