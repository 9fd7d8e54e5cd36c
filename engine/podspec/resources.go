package podspec

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	helpers "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/resources"
)

// containerResources maps c's CPU and memory requests and limits to cgroup
// settings as kubelet does (generateLinuxContainerResources): shares from
// the CPU request (or the limit when no request is set; 2 minimum), a CFS
// quota over a 100 ms period from the CPU limit, the memory limit in bytes
// (the pod-level limits stand in for limits the container does not set),
// the oom_score_adj of its QoS class and its hugepage limits.
func containerResources(pod *v1.Pod, c *v1.Container, memCapacity int64, static bool) *runtimeapi.LinuxContainerResources {
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
	r.OomScoreAdj = int64(resources.OOMScoreAdj(pod, c, memCapacity, static))
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
