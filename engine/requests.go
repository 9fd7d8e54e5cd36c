package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	helpers "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/resources"
	"github.com/speclet/speclet/engine/volume"
)

// This file builds the CRI requests of a pod (sandbox and container
// configs, mounts, resources) and holds the small CRI helpers the actions
// share.

// podLogDir is the sandbox LogDirectory under --root-dir:
// <root>/logs/<namespace>_<name>_<uid>.
func podLogDir(root string, pod *v1.Pod) string {
	return filepath.Join(root, "logs", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// sandboxConfig builds the RunPodSandbox request for pod. hostNetwork pods get
// the node's network namespace (no CNI); others get a pod network namespace
// from the runtime's CNI.
//
// cgroupParent is the pod's cgroup (--cgroups-per-qos), "" for the
// runtime's default. Linux.Resources carries the pod's requests and limits
// without the overhead, Linux.Overhead the overhead (kubelet's
// applySandboxResources).
func sandboxConfig(root string, pod *v1.Pod, attempt uint32, cgroupParent string) *runtimeapi.PodSandboxConfig {
	netMode := runtimeapi.NamespaceMode_POD
	if pod.Spec.HostNetwork {
		netMode = runtimeapi.NamespaceMode_NODE
	}
	pidMode := runtimeapi.NamespaceMode_CONTAINER
	if pod.Spec.HostPID {
		pidMode = runtimeapi.NamespaceMode_NODE
	} else if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		pidMode = runtimeapi.NamespaceMode_POD
	}
	ipcMode := runtimeapi.NamespaceMode_POD
	if pod.Spec.HostIPC {
		ipcMode = runtimeapi.NamespaceMode_NODE
	}
	hostname := ""
	if !pod.Spec.HostNetwork {
		hostname = pod.Name
		if pod.Spec.Hostname != "" {
			hostname = pod.Spec.Hostname
		}
		if len(hostname) > 63 {
			hostname = hostname[:63]
		}
	}
	ann := runtimeAnnotations(pod.Annotations)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		ann[AnnotationGracePeriod] = strconv.FormatInt(*g, 10)
	}
	var ports []*runtimeapi.PortMapping
	if !pod.Spec.HostNetwork {
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				if p.HostPort == 0 {
					continue
				}
				proto := runtimeapi.Protocol_TCP
				switch p.Protocol {
				case v1.ProtocolUDP:
					proto = runtimeapi.Protocol_UDP
				case v1.ProtocolSCTP:
					proto = runtimeapi.Protocol_SCTP
				}
				ports = append(ports, &runtimeapi.PortMapping{Protocol: proto, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP})
			}
		}
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		Hostname:     hostname,
		LogDirectory: podLogDir(root, pod),
		PortMappings: ports,
		Labels:       podLabels(pod),
		Annotations:  ann,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: cgroupParent,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: netMode, Pid: pidMode, Ipc: ipcMode},
			},
			Resources: sandboxResources(pod),
			Overhead:  overheadResources(pod),
		},
	}
}

// Bounds on what speclet writes to the runtime, so that no pod and no set
// of up to Config.MaxPods pods (--max-pods, default 110) makes a CRI list
// call exceed the 16 MiB gRPC message limit (cri.MaxMsgSize; containerd
// sends no larger message).
//
// A sandbox record (ListPodSandbox) holds an id, its metadata (name <= 253,
// namespace <= 63, uid <= 63), speclet's three labels (the same values),
// the pod's annotations cut to MaxRuntimeAnnotationBytes and speclet's own:
// at most MaxSandboxRecordBytes. A container record (ListContainers) holds
// two ids, its name (<= 63), the image twice (<= 512 each,
// config.MaxImageLength) and its image ref, speclet's four labels and three
// annotations: at most MaxContainerRecordBytes. TestRuntimeRecordBounds
// checks both with the largest values a valid manifest allows.
//
// A pod has at most config.MaxContainers (24) containers, each with at most
// two instances in the runtime under the default container GC (one dead
// instance kept for its status and logs, ContainerGC.MaxPerContainer = 1,
// and the running one; `speclet run` refuses a larger
// --maximum-dead-containers-per-container that breaks this bound for its
// --max-pods), and at most two sandboxes. So ListPodSandbox
// returns at most 110 * 2 * 6 KiB = 1.3 MiB and ListContainers at most
// 110 * 24 * 2 * 3 KiB = 15.5 MiB. (Instances whose RemoveContainer keeps
// failing stay longer: a runtime failing that way is unhealthy anyway.)
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

// pullPolicy returns the container's effective pull policy: the declared one,
// else Always for ":latest" or untagged images and IfNotPresent otherwise.
func pullPolicy(c *v1.Container) v1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	img := c.Image
	if strings.Contains(img, "@") {
		return v1.PullIfNotPresent
	}
	slash := strings.LastIndexByte(img, '/')
	colon := strings.LastIndexByte(img, ':')
	if colon <= slash || img[colon+1:] == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// imagePresent reports the image reference (id) of c's image if the runtime
// has it, or "".
func imagePresent(ctx context.Context, rt cri.Runtime, image string) (string, error) {
	img, err := rt.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image})
	if err != nil {
		return "", fmt.Errorf("image status %q: %w", image, err)
	}
	if img == nil {
		return "", nil
	}
	return img.Id, nil
}

// pullImage pulls image and returns its reference.
func pullImage(ctx context.Context, rt cri.Runtime, image string, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	ref, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: image}, nil, sandbox)
	if err != nil {
		return "", fmt.Errorf("pull image %q: %w", image, err)
	}
	return ref, nil
}

// containerConfig builds the CreateContainer request for c, the restartCount-th
// attempt of that container in pod, on a node with memCapacity bytes of
// memory (for the container's oom_score_adj).
func containerConfig(root string, pod *v1.Pod, c *v1.Container, restartCount int32, imageRef string, init bool, memCapacity int64) (*runtimeapi.ContainerConfig, error) {
	envs := make([]*runtimeapi.KeyValue, 0, len(c.Env))
	vars := make(map[string]string, len(c.Env))
	for _, e := range c.Env {
		v := expand(e.Value, vars) // later variables may refer to earlier ones
		vars[e.Name] = v
		envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(v)})
	}
	command := make([]string, len(c.Command))
	for i, a := range c.Command {
		command[i] = expand(a, vars)
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = expand(a, vars)
	}
	mounts, err := containerMounts(root, pod, c)
	if err != nil {
		return nil, err
	}
	netMode := runtimeapi.NamespaceMode_POD
	if pod.Spec.HostNetwork {
		netMode = runtimeapi.NamespaceMode_NODE
	}
	ann := map[string]string{
		AnnotationContainerHash: containerHash(c),
		AnnotationRestartCount:  strconv.Itoa(int(restartCount)),
	}
	if init {
		ann[AnnotationInitContainer] = "true"
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		ann[AnnotationGracePeriod] = strconv.FormatInt(*g, 10)
	}
	image := imageRef
	if image == "" {
		image = c.Image
	}
	return &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image},
		Command:     command,
		Args:        args,
		WorkingDir:  c.WorkingDir,
		Envs:        envs,
		Mounts:      mounts,
		Labels:      containerLabels(pod, c.Name),
		Annotations: ann,
		LogPath:     filepath.Join(c.Name, strconv.Itoa(int(restartCount))+".log"),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources: containerResources(pod, c, memCapacity),
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{
					Network: netMode, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD,
				},
			},
		},
	}, nil
}

// containerMounts maps c's volume mounts to the host paths mount_volumes
// set up (engine/volume). subPath selects a path inside the volume (it may
// not leave it); configMap, secret, downwardAPI and projected volumes are
// always read-only, as under kubelet. An unknown volume or kind is an
// error naming the pod, container and volume.
func containerMounts(root string, pod *v1.Pod, c *v1.Container) ([]*runtimeapi.Mount, error) {
	if len(c.VolumeMounts) == 0 {
		return nil, nil
	}
	vols := make(map[string]*v1.Volume, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var mounts []*runtimeapi.Mount
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			return nil, fmt.Errorf("pod %s/%s container %q: volumeMounts %q: no such volume", pod.Namespace, pod.Name, c.Name, m.Name)
		}
		host := volume.HostPath(root, pod, v)
		if host == "" {
			return nil, fmt.Errorf("pod %s/%s volume %q: volume type %q is not supported", pod.Namespace, pod.Name, v.Name, volume.Type(&v.VolumeSource))
		}
		if m.SubPathExpr != "" {
			return nil, fmt.Errorf("pod %s/%s container %q: volumeMounts %q: subPathExpr is not supported", pod.Namespace, pod.Name, c.Name, m.Name)
		}
		if m.SubPath != "" {
			p, err := volume.SubPath(host, m.SubPath)
			if err != nil {
				return nil, fmt.Errorf("pod %s/%s container %q: volumeMounts %q: %w", pod.Namespace, pod.Name, c.Name, m.Name, err)
			}
			host = p
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: m.MountPath, HostPath: host, Readonly: m.ReadOnly || volume.ReadOnlyKind(v)})
	}
	return mounts, nil
}

// stopContainer stops id, killing it after grace seconds; a container the
// runtime no longer knows counts as stopped.
func stopContainer(ctx context.Context, rt cri.Runtime, name, id string, grace int64) error {
	if err := rt.StopContainer(ctx, id, grace); err != nil && !cri.IsNotFound(err) {
		return fmt.Errorf("stop container %q: %w", name, err)
	}
	return nil
}

func removeContainer(ctx context.Context, rt cri.Runtime, name, id string) error {
	if err := rt.RemoveContainer(ctx, id); err != nil && !cri.IsNotFound(err) {
		return fmt.Errorf("remove container %q: %w", name, err)
	}
	return nil
}

// containerResources maps c's CPU and memory requests and limits to cgroup
// settings as kubelet does (generateLinuxContainerResources): shares from
// the CPU request (or the limit when no request is set; 2 minimum), a CFS
// quota over a 100 ms period from the CPU limit, the memory limit in bytes
// (the pod-level limits stand in for limits the container does not set),
// the oom_score_adj of its QoS class and its hugepage limits.
func containerResources(pod *v1.Pod, c *v1.Container, memCapacity int64) *runtimeapi.LinuxContainerResources {
	var cpuReq *resource.Quantity
	if q, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
		cpuReq = &q
	}
	cpuLim, memLim := c.Resources.Limits.Cpu(), c.Resources.Limits.Memory()
	if pod.Spec.Resources != nil {
		if cpuLim.IsZero() {
			cpuLim = pod.Spec.Resources.Limits.Cpu()
		}
		if memLim.IsZero() {
			memLim = pod.Spec.Resources.Limits.Memory()
		}
	}
	r := linuxResources(cpuReq, cpuLim, memLim)
	r.OomScoreAdj = int64(resources.OOMScoreAdj(pod, c, memCapacity, config.IsStatic(pod)))
	r.HugepageLimits = hugepageLimits(c.Resources)
	return r
}

// linuxResources is kubelet's calculateLinuxResources with CFS quota
// enforced: no period is set when there is no CPU limit.
func linuxResources(cpuReq, cpuLim, memLim *resource.Quantity) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	if cpuReq == nil && cpuLim != nil && !cpuLim.IsZero() {
		r.CpuShares = int64(resources.MilliCPUToShares(cpuLim.MilliValue()))
	} else if cpuReq != nil {
		r.CpuShares = int64(resources.MilliCPUToShares(cpuReq.MilliValue()))
	} else {
		r.CpuShares = resources.MinShares
	}
	if cpuLim != nil && !cpuLim.IsZero() {
		r.CpuPeriod = resources.QuotaPeriod
		r.CpuQuota = resources.MilliCPUToQuota(cpuLim.MilliValue(), resources.QuotaPeriod)
	}
	if memLim != nil {
		r.MemoryLimitInBytes = memLim.Value()
	}
	return r
}

// sandboxResources is the pod's whole requests and limits without the
// overhead (kubelet's calculateSandboxResources).
func sandboxResources(pod *v1.Pod) *runtimeapi.LinuxContainerResources {
	opts := helpers.PodResourcesOptions{ExcludeOverhead: true}
	req, lim := helpers.PodRequests(pod, opts), helpers.PodLimits(pod, opts)
	var cpuReq *resource.Quantity
	if q, ok := req[v1.ResourceCPU]; ok {
		cpuReq = &q
	}
	return linuxResources(cpuReq, lim.Cpu(), lim.Memory())
}

// overheadResources is the pod's overhead as resources with requests equal
// to limits; empty when the pod has none.
func overheadResources(pod *v1.Pod) *runtimeapi.LinuxContainerResources {
	if pod.Spec.Overhead == nil {
		return &runtimeapi.LinuxContainerResources{}
	}
	cpu := pod.Spec.Overhead.Cpu()
	return linuxResources(cpu, cpu, pod.Spec.Overhead.Memory())
}

// hugepageLimits lists a limit for every hugepage size the container
// requests or limits (kubelet's GetHugepageLimitsFromResources: limits win
// over requests; sizes the container does not use are left to the runtime).
func hugepageLimits(r v1.ResourceRequirements) []*runtimeapi.HugepageLimit {
	sizes := map[int64]int64{}
	for _, list := range []v1.ResourceList{r.Requests, r.Limits} { // limits last: they win
		for size, v := range resources.HugePageLimits(list) {
			sizes[size] = v
		}
	}
	if len(sizes) == 0 {
		return nil
	}
	keys := make([]int64, 0, len(sizes))
	for k := range sizes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	out := make([]*runtimeapi.HugepageLimit, 0, len(keys))
	for _, k := range keys {
		out = append(out, &runtimeapi.HugepageLimit{PageSize: resources.HugePageSizeString(k), Limit: uint64(sizes[k])})
	}
	return out
}

// expand replaces $(NAME) with the value of the container's environment
// variable NAME, as kubelet does in env values, command and args: "$$"
// escapes a "$", and a reference to an unknown variable stays as written.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
