package worker

import (
	"context"
	"sort"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/engine/volume"
)

// This file gives the CRI requests of a pod (engine/podspec builds them)
// speclet's identity, bounds what speclet writes to the runtime, and holds
// the small CRI helpers the actions share.

// sandboxConfig builds the RunPodSandbox request for pod (engine/podspec)
// with speclet's labels and annotations.
func sandboxConfig(n podspec.Node, pod *v1.Pod, attempt uint32, cgroupParent string, userns *runtimeapi.UserNamespace) (*runtimeapi.PodSandboxConfig, error) {
	ann := runtimeAnnotations(pod.Annotations)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		ann[runtimepods.AnnotationGracePeriod] = strconv.FormatInt(*g, 10)
	}
	return podspec.Sandbox(n, podspec.SandboxRequest{Pod: pod, Attempt: attempt, CgroupParent: cgroupParent,
		Labels: runtimepods.PodLabels(pod), Annotations: ann, UserNamespace: userns})
}

// containerConfig builds the CreateContainer request for c, the
// restartCount-th attempt of that container in pod (engine/podspec), with
// speclet's labels and annotations.
// user is the image's user for a runAsNonRoot check; with sets the
// request's inputs from the running pod (addresses, API objects, service
// variables).
func containerConfig(n podspec.Node, pod *v1.Pod, c *v1.Container, restartCount int32, imageRef string, init bool, user podspec.ImageUser, with ...func(*podspec.ContainerRequest)) (*runtimeapi.ContainerConfig, error) {
	ann := runtimepods.KubeletAnnotations(pod, c, restartCount)
	ann[runtimepods.AnnotationContainerHash] = runtimepods.ContainerHash(c)
	ann[runtimepods.AnnotationRestartCount] = strconv.Itoa(int(restartCount))
	if init {
		ann[runtimepods.AnnotationInitContainer] = "true"
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		ann[runtimepods.AnnotationGracePeriod] = strconv.FormatInt(*g, 10)
	}
	r := podspec.ContainerRequest{Pod: pod, Container: c, RestartCount: restartCount,
		ImageRef: imageRef, Init: init, Labels: runtimepods.ContainerLabels(pod, c.Name), Annotations: ann, ImageUser: user}
	for _, f := range with {
		f(&r)
	}
	return podspec.Container(n, r)
}

// Bounds on what speclet writes to the runtime, so that every CRI list
// reply fits the 16 MiB gRPC message limit (cri.MaxMsgSize; kubelet's
// client and containerd's server stop there and the CRI has no pagination).
//
// A sandbox record (ListPodSandbox) holds an id, its metadata (name <= 253,
// namespace <= 63, uid <= 63), speclet's three labels (the same values),
// the pod's annotations cut to MaxRuntimeAnnotationBytes and speclet's own:
// at most MaxSandboxRecordBytes. A container record (ListContainers) holds
// two ids, its name (<= 63), the image twice (<= 512 each,
// config.MaxImageLength) and its image ref, speclet's and kubelet's labels
// and annotations (kubelet's preStop hook and ports as JSON within
// runtimepods.MaxHookAnnotationBytes): at most MaxContainerRecordBytes.
// TestRuntimeRecordBounds checks both with the largest values a valid
// manifest allows.
//
// A pod has at most config.MaxContainers (24) containers, each with at most
// two instances in the runtime under the default container GC (one dead
// instance kept for its status and logs, ContainerGC.MaxPerContainer = 1,
// and the running one), and at most two sandboxes. ListPodSandbox is made
// whole: --max-pods 250 gives at most 250 * 2 * 6 KiB = 3 MiB (`speclet run`
// refuses more than 1,365 pods). ListContainers of 250 such pods could
// reach 250 * 24 * 2 * 3 KiB = 35 MiB, so the CRI client splits a list
// whose whole reply is too large into one call per sandbox (cri/split.go):
// one pod's reply is at most 24 * 2 * 3 KiB = 144 KiB (`speclet run`
// refuses a --maximum-dead-containers-per-container over 226, which would
// break that bound). (Instances whose RemoveContainer keeps failing stay
// longer: a runtime failing that way is unhealthy anyway.)
const (
	// MaxRuntimeAnnotationBytes is the share of a pod's annotations
	// copied onto its sandbox (keys in order, each that still fits); the
	// pod keeps all of them in /pods.
	MaxRuntimeAnnotationBytes = 4 << 10
	MaxSandboxRecordBytes     = 6 << 10
	MaxContainerRecordBytes   = 3 << 10
)

// runtimeAnnotations copies the pod's annotations in key order while they
// fit in MaxRuntimeAnnotationBytes; an annotation that does not fit is left
// off (the next smaller ones may still fit).
func runtimeAnnotations(pod map[string]string) map[string]string {
	keys := make([]string, 0, len(pod))
	for k := range pod {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ann := make(map[string]string, len(keys)+1)
	left := MaxRuntimeAnnotationBytes
	for _, k := range keys {
		if n := len(k) + len(pod[k]); n <= left {
			ann[k] = pod[k]
			left -= n
		}
	}
	return ann
}

// requestInputs are what a container's config reads from the running pod:
// its addresses (the node's for a hostNetwork pod), the node's, the
// configMaps and secrets of its namespace (Host.VolumeAPI), and the
// service variables (Host.Services), and the pod's user namespace
// (Host.UserNamespace). Services not yet read are an error for a pod from
// the API server, as under kubelet; a static pod goes on with what there
// is.
func (p *podState) requestInputs(ctx context.Context) (func(*podspec.ContainerRequest), error) {
	userns, err := p.userNamespace()
	if err != nil {
		return nil, err
	}
	var services []*v1.Service
	if list := p.h.Services; list != nil {
		var err error
		services, err = list()
		if err != nil && !config.IsStatic(p.pod) {
			return nil, err
		}
	}
	return func(r *podspec.ContainerRequest) {
		r.UserNamespace = userns
		podIP := p.sandbox.PodIP()
		if p.pod.Spec.HostNetwork {
			podIP = p.h.NodeIP
		}
		if podIP != "" {
			r.PodIPs = []string{podIP}
		}
		if ip := p.h.NodeIP; ip != "" {
			r.HostIPs = []string{ip}
		}
		if api := p.h.VolumeAPI; api != nil {
			r.Objects = apiObjects{ctx: ctx, api: api, ns: p.pod.Namespace}
		}
		if p.h.Services != nil {
			r.ServiceEnv = podspec.ServiceEnv(services, p.pod.Namespace, p.pod.Spec.EnableServiceLinks)
		}
	}, nil
}

// apiObjects reads a namespace's configMaps and secrets for
// engine/podspec.
type apiObjects struct {
	ctx context.Context
	api volume.API
	ns  string
}

func (o apiObjects) ConfigMap(name string) (*v1.ConfigMap, error) {
	return o.api.GetConfigMap(o.ctx, o.ns, name)
}

func (o apiObjects) Secret(name string) (*v1.Secret, error) {
	return o.api.GetSecret(o.ctx, o.ns, name)
}
