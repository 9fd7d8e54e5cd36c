// Package resources computes what a pod's resources mean for the node, as
// kubelet computes them: the QoS class, the oom_score_adj of each container
// (pkg/kubelet/qos/policy.go), the pod's cgroup settings
// (pkg/kubelet/cm/helpers_linux.go ResourceConfigForPod), hugepage limits,
// and node allocatable. It is pure: no cgroup file is touched here.
//
// # Usage
//
//	class := resources.QOSClass(pod)
//	adj := resources.OOMScoreAdj(pod, &pod.Spec.Containers[0], capacityBytes)
//	cfg := resources.PodConfig(pod) // shares, quota, memory limit of pod<uid>
package resources

import (
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	helpers "k8s.io/component-helpers/resource"
)

// OOM score adjustments (kubelet pkg/kubelet/qos/policy.go).
const (
	GuaranteedOOMScoreAdj = -997
	BestEffortOOMScoreAdj = 1000
	// The sandbox (pause) process of every pod: kubelet's PodInfraOOMAdj.
	PodInfraOOMScoreAdj = -998
)

// CPU conversions (kubelet pkg/kubelet/cm/helpers_linux.go).
const (
	MinShares     = 2
	MaxShares     = 262144
	SharesPerCPU  = 1024
	MilliCPUToCPU = 1000
	// QuotaPeriod is the CFS period in microseconds (100 ms).
	QuotaPeriod = 100000
	// MinQuotaPeriod is the smallest CFS quota kubelet writes (1 ms).
	MinQuotaPeriod = 1000
)

// SystemNodeCritical is the priority class of pods that are killed last.
const SystemNodeCritical = "system-node-critical"

// QOSClass returns the pod's QoS class as kubelet computes it (v1qos
// ComputePodQOS, with pod-level resources): Guaranteed when every container
// (or the pod level) has CPU and memory limits equal to its requests,
// BestEffort when no CPU or memory request or limit is set anywhere,
// Burstable otherwise. A limit without a request counts as the request (the
// API server's defaulting). A status that names the class wins.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	// Only CPU and memory count: two sums each, no maps, so that a status
	// computed for every pod allocates nothing here.
	var requests, limits cpuMemory
	guaranteed := true
	if pod.Spec.Resources != nil {
		requests.add(pod.Spec.Resources.Requests, nil)
		if len(pod.Spec.Resources.Limits) > 0 {
			if cpu, mem := limits.add(pod.Spec.Resources.Limits, nil); !cpu || !mem {
				guaranteed = false
			}
		}
	} else {
		for _, cs := range [2][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
			for i := range cs {
				r := &cs[i].Resources
				requests.add(r.Requests, r.Limits)
				if cpu, mem := limits.add(r.Limits, nil); !cpu || !mem {
					guaranteed = false
				}
			}
		}
	}
	if requests.empty() && limits.empty() {
		return v1.PodQOSBestEffort
	}
	if guaranteed && requests.equal(&limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// cpuMemory sums the positive CPU and memory quantities of resource lists.
type cpuMemory struct {
	cpu, mem       resource.Quantity
	hasCPU, hasMem bool
}

// add adds the positive CPU and memory quantities of src to s; a resource
// that src does not name is taken from dflt (the API server's defaulting of
// a request from its limit; nil: none). It reports which of the two src (or
// dflt) had positive.
func (s *cpuMemory) add(src, dflt v1.ResourceList) (cpu, mem bool) {
	cpu = addPositive(&s.cpu, &s.hasCPU, src, dflt, v1.ResourceCPU)
	mem = addPositive(&s.mem, &s.hasMem, src, dflt, v1.ResourceMemory)
	return cpu, mem
}

// addPositive adds src[name] (dflt[name] when src does not name it) to sum
// when it is positive, and reports whether it was.
func addPositive(sum *resource.Quantity, has *bool, src, dflt v1.ResourceList, name v1.ResourceName) bool {
	q, ok := src[name]
	if !ok {
		q, ok = dflt[name]
	}
	if !ok || q.Sign() <= 0 {
		return false
	}
	if *has {
		sum.Add(q)
	} else {
		*sum, *has = q.DeepCopy(), true
	}
	return true
}

func (s *cpuMemory) empty() bool { return !s.hasCPU && !s.hasMem }

// equal: both name the same resources with equal sums.
func (s *cpuMemory) equal(o *cpuMemory) bool {
	return s.hasCPU == o.hasCPU && s.hasMem == o.hasMem &&
		(!s.hasCPU || s.cpu.Cmp(o.cpu) == 0) && (!s.hasMem || s.mem.Cmp(o.mem) == 0)
}

// IsCritical: a static or mirror pod, or one with a system-critical priority
// (kubelet pkg/kubelet/types IsCriticalPod). Critical pods are never evicted.
func IsCritical(pod *v1.Pod, static bool) bool {
	if static {
		return true
	}
	if _, ok := pod.Annotations[v1.MirrorPodAnnotationKey]; ok {
		return true
	}
	const systemCriticalPriority = 2 * 1000000000
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

// OOMScoreAdj returns the oom_score_adj of container c of pod on a node with
// memCapacity bytes of memory, as kubelet's GetContainerOOMScoreAdjust:
// -997 for Guaranteed pods and critical pods of class system-node-critical,
// 1000 for BestEffort, and for Burstable 1000 - 1000*request/capacity (the
// request raised by the pod-level request not given to containers; a
// sidecar gets at most the score of the smallest regular container), kept
// within [3, 999] so that Burstable ranks between the other two classes.
func OOMScoreAdj(pod *v1.Pod, c *v1.Container, memCapacity int64, static bool) int {
	if IsCritical(pod, static) && pod.Spec.PriorityClassName == SystemNodeCritical {
		return GuaranteedOOMScoreAdj
	}
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return GuaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return BestEffortOOMScoreAdj
	}
	if memCapacity <= 0 {
		return BestEffortOOMScoreAdj - 1
	}
	req := c.Resources.Requests.Memory().Value()
	var extra int64
	if helpers.IsPodLevelRequestsSet(pod) {
		extra = remainingPodMemoryPerContainer(pod)
	}
	adj := 1000 - (1000*(req+extra))/memCapacity
	if isSidecar(pod, c) {
		minAdj := 1000 - (1000*(minRegularMemory(pod)+extra))/memCapacity
		adj = min(adj, minAdj)
	}
	if adj < 1000+GuaranteedOOMScoreAdj {
		return 1000 + GuaranteedOOMScoreAdj
	}
	if adj == BestEffortOOMScoreAdj {
		return BestEffortOOMScoreAdj - 1
	}
	return int(adj)
}

func isSidecar(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	for _, ic := range pod.Spec.InitContainers {
		if ic.Name == c.Name {
			return true
		}
	}
	return false
}

// minRegularMemory is the smallest memory request of the regular
// containers (0 when one has none).
func minRegularMemory(pod *v1.Pod) int64 {
	var m int64 = -1
	for _, c := range pod.Spec.Containers {
		r := c.Resources.Requests.Memory().Value()
		if m < 0 || r < m {
			m = r
		}
	}
	return max(m, 0)
}

// remainingPodMemoryPerContainer shares the pod-level memory request not
// given to containers equally among the regular containers and sidecars.
func remainingPodMemoryPerContainer(pod *v1.Pod) int64 {
	podReq := pod.Spec.Resources.Requests.Memory().Value()
	var sum int64
	n := int64(len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		sum += c.Resources.Requests.Memory().Value()
	}
	for i := range pod.Spec.InitContainers {
		if isSidecar(pod, &pod.Spec.InitContainers[i]) {
			sum += pod.Spec.InitContainers[i].Resources.Requests.Memory().Value()
			n++
		}
	}
	if n == 0 || podReq <= sum {
		return 0
	}
	return (podReq - sum) / n
}

// Requests returns the pod's effective requests (kubelet's PodRequests:
// the larger of the running containers' sum and each init container's peak,
// pod-level requests where set, plus the overhead).
func Requests(pod *v1.Pod) v1.ResourceList {
	return helpers.PodRequests(pod, helpers.PodResourcesOptions{})
}

// MilliCPUToShares converts a CPU request to cpu.shares (at least 2).
func MilliCPUToShares(milli int64) uint64 {
	if milli == 0 {
		return MinShares
	}
	s := milli * SharesPerCPU / MilliCPUToCPU
	return uint64(min(max(s, MinShares), MaxShares))
}

// MilliCPUToQuota converts a CPU limit to a CFS quota over period (0 = no
// limit; at least 1 ms otherwise).
func MilliCPUToQuota(milli, period int64) int64 {
	if milli == 0 {
		return 0
	}
	return max(milli*period/MilliCPUToCPU, MinQuotaPeriod)
}

// SharesToWeight converts cpu.shares to cgroup v2 cpu.weight.
func SharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	return 1 + ((shares-2)*9999)/262142
}

// CgroupConfig is what kubelet writes into a pod's (or QoS class's) cgroup.
// A nil field is left as the runtime made it.
type CgroupConfig struct {
	CPUShares *uint64
	CPUQuota  *int64 // microseconds per CPUPeriod; -1 = unlimited
	CPUPeriod *uint64
	Memory    *int64          // bytes
	HugePages map[int64]int64 // page size (bytes) -> limit (bytes)
}

// PodConfig returns the settings of the pod's cgroup (kubelet
// ResourceConfigForPod with CFS quota enforced): Guaranteed pods get shares,
// quota and the memory limit; Burstable pods get shares, and quota or the
// memory limit only when every container declares that limit (or the pod
// level does); BestEffort pods get 2 shares. Hugepage limits come from the
// requests.
func PodConfig(pod *v1.Pod) CgroupConfig {
	reqs := helpers.PodRequests(pod, helpers.PodResourcesOptions{})
	cpuLimits, memLimits := true, true
	limits := helpers.PodLimits(pod, helpers.PodResourcesOptions{
		ContainerFn: func(res v1.ResourceList, _ helpers.ContainerType) {
			if res.Cpu().IsZero() {
				cpuLimits = false
			}
			if res.Memory().IsZero() {
				memLimits = false
			}
		},
	})
	if helpers.IsPodLevelResourcesSet(pod) {
		if !pod.Spec.Resources.Limits.Cpu().IsZero() {
			cpuLimits = true
		}
		if !pod.Spec.Resources.Limits.Memory().IsZero() {
			memLimits = true
		}
	}
	shares := MilliCPUToShares(reqs.Cpu().MilliValue())
	quota := MilliCPUToQuota(limits.Cpu().MilliValue(), QuotaPeriod)
	if quota == 0 {
		quota = -1
	}
	period := uint64(QuotaPeriod)
	mem := limits.Memory().Value()
	cfg := CgroupConfig{HugePages: HugePageLimits(reqs)}
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		cfg.CPUShares, cfg.CPUQuota, cfg.CPUPeriod, cfg.Memory = &shares, &quota, &period, &mem
	case v1.PodQOSBurstable:
		cfg.CPUShares = &shares
		if cpuLimits {
			cfg.CPUQuota, cfg.CPUPeriod = &quota, &period
		}
		if memLimits {
			cfg.Memory = &mem
		}
	default:
		s := uint64(MinShares)
		cfg.CPUShares = &s
	}
	return cfg
}

// HugePageLimits maps the hugepages-<size> entries of list to page size in
// bytes -> limit in bytes.
func HugePageLimits(list v1.ResourceList) map[int64]int64 {
	var out map[int64]int64
	for name, q := range list {
		size, ok := HugePageSize(name)
		if !ok {
			continue
		}
		if out == nil {
			out = map[int64]int64{}
		}
		out[size] += q.Value()
	}
	return out
}

// HugePageSize parses "hugepages-2Mi" to 2097152.
func HugePageSize(name v1.ResourceName) (int64, bool) {
	s, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
	if !ok {
		return 0, false
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Value() <= 0 {
		return 0, false
	}
	return q.Value(), true
}

// HugePageSizeString formats a page size as the kernel's hugetlb files name
// it: "2MB", "1GB", "64KB".
func HugePageSizeString(size int64) string {
	units := []string{"B", "KB", "MB", "GB", "TB"}
	i := 0
	for size >= 1024 && size%1024 == 0 && i < len(units)-1 {
		size /= 1024
		i++
	}
	return strconv.FormatInt(size, 10) + units[i]
}
