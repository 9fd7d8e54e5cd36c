package resources

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

const gi = int64(1) << 30

func pod(containers ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{}
	for _, r := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c", Resources: r})
	}
	return p
}

func rr(req, lim string) v1.ResourceRequirements {
	return v1.ResourceRequirements{Requests: MustList(req), Limits: MustList(lim)}
}

// TestQOSAndOOMScore: kubelet's QoS class and oom_score_adj of the first
// container on a node with 10 GiB of memory.
func TestQOSAndOOMScore(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		class v1.PodQOSClass
		adj   int
	}{
		{"no resources", pod(rr("", "")), v1.PodQOSBestEffort, 1000},
		{"limits equal requests", pod(rr("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")), v1.PodQOSGuaranteed, -997},
		{"one container without limits", pod(rr("cpu=1,memory=1Gi", "cpu=1,memory=1Gi"), rr("", "")), v1.PodQOSBurstable, 900},
		{"request 1Gi of 10Gi", pod(rr("memory=1Gi", "memory=2Gi")), v1.PodQOSBurstable, 900},
		{"cpu request only: 1000 becomes 999", pod(rr("cpu=100m", "")), v1.PodQOSBurstable, 999},
		{"request above capacity: floor 3", pod(rr("memory=20Gi", "")), v1.PodQOSBurstable, 3},
		{"limits differ from requests", pod(rr("cpu=1,memory=1Gi", "cpu=2,memory=1Gi")), v1.PodQOSBurstable, 900},
		{"ephemeral storage does not count", pod(rr("ephemeral-storage=1Gi", "")), v1.PodQOSBestEffort, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := QOSClass(tc.pod); got != tc.class {
				t.Errorf("QoS class %s, want %s", got, tc.class)
			}
			if got := OOMScoreAdj(tc.pod, &tc.pod.Spec.Containers[0], 10*gi, false); got != tc.adj {
				t.Errorf("oom_score_adj %d, want %d", got, tc.adj)
			}
		})
	}
}

// TestQOSClassSums: the class comes from the sums over every container,
// init containers included, or from the pod-level resources when set; a
// limit without a request counts as the request, a zero quantity as none.
func TestQOSClassSums(t *testing.T) {
	withInit := func(p *v1.Pod, r v1.ResourceRequirements) *v1.Pod {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "i", Resources: r})
		return p
	}
	podLevel := func(p *v1.Pod, r v1.ResourceRequirements) *v1.Pod {
		p.Spec.Resources = &r
		return p
	}
	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		class v1.PodQOSClass
	}{
		{"limits only", pod(rr("", "cpu=1,memory=1Gi")), v1.PodQOSGuaranteed},
		{"limits only, two containers", pod(rr("", "cpu=1,memory=1Gi"), rr("", "cpu=2,memory=2Gi")), v1.PodQOSGuaranteed},
		{"init container guaranteed too", withInit(pod(rr("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")), rr("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")), v1.PodQOSGuaranteed},
		{"init container without limits", withInit(pod(rr("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")), rr("cpu=1", "")), v1.PodQOSBurstable},
		{"init container request only makes a best-effort pod burstable", withInit(pod(rr("", "")), rr("memory=1Mi", "")), v1.PodQOSBurstable},
		{"cpu limit only", pod(rr("", "cpu=1")), v1.PodQOSBurstable},
		{"zero request with a limit", pod(rr("cpu=0,memory=1Gi", "cpu=1,memory=1Gi")), v1.PodQOSBurstable},
		{"zero quantities only", pod(rr("cpu=0", "memory=0")), v1.PodQOSBestEffort},
		{"pod level guaranteed", podLevel(pod(rr("", "")), rr("cpu=1,memory=1Gi", "cpu=1,memory=1Gi")), v1.PodQOSGuaranteed},
		{"pod level without memory limit", podLevel(pod(rr("", "")), rr("cpu=1,memory=1Gi", "cpu=1")), v1.PodQOSBurstable},
		{"pod level requests only", podLevel(pod(rr("", "")), rr("cpu=1", "")), v1.PodQOSBurstable},
		{"pod level wins over containers", podLevel(pod(rr("cpu=1", "")), rr("", "")), v1.PodQOSBestEffort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := QOSClass(tc.pod); got != tc.class {
				t.Errorf("QoS class %s, want %s", got, tc.class)
			}
		})
	}
}

// TestQOSClassAllocates: computing the class allocates nothing (it runs for
// every pod's status and every container's config).
func TestQOSClassAllocates(t *testing.T) {
	p := pod(rr("cpu=1,memory=1Gi", "cpu=1,memory=1Gi"), rr("cpu=100m", "memory=1Gi"))
	if n := testing.AllocsPerRun(100, func() { QOSClass(p) }); n != 0 {
		t.Errorf("QOSClass allocates %v times, want 0", n)
	}
}

// TestOOMScoreNodeCritical: a static pod of class system-node-critical is
// killed last even when Burstable; a plain static Burstable pod is not.
func TestOOMScoreNodeCritical(t *testing.T) {
	p := pod(rr("memory=1Gi", ""))
	if got := OOMScoreAdj(p, &p.Spec.Containers[0], 10*gi, true); got != 900 {
		t.Errorf("static burstable: %d, want 900", got)
	}
	p.Spec.PriorityClassName = SystemNodeCritical
	if got := OOMScoreAdj(p, &p.Spec.Containers[0], 10*gi, true); got != -997 {
		t.Errorf("static system-node-critical: %d, want -997", got)
	}
}

// TestOOMScoreSidecar: a sidecar scores at most like the smallest regular
// container.
func TestOOMScoreSidecar(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	p := pod(rr("memory=4Gi", ""))
	p.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: &always, Resources: rr("memory=1Gi", "")}}
	if got := OOMScoreAdj(p, &p.Spec.InitContainers[0], 10*gi, false); got != 600 {
		t.Errorf("sidecar: %d, want 600 (the regular container's)", got)
	}
}

// TestPodConfig: the pod cgroup's settings per QoS class.
func TestPodConfig(t *testing.T) {
	g := PodConfig(pod(rr("cpu=500m,memory=1Gi", "cpu=500m,memory=1Gi")))
	if *g.CPUShares != 512 || *g.CPUQuota != 50000 || *g.CPUPeriod != QuotaPeriod || *g.Memory != gi {
		t.Errorf("guaranteed: shares %d quota %d memory %d", *g.CPUShares, *g.CPUQuota, *g.Memory)
	}
	b := PodConfig(pod(rr("cpu=100m,memory=1Gi", "memory=2Gi"), rr("cpu=100m", "memory=1Gi")))
	if *b.CPUShares != 204 || b.CPUQuota != nil || *b.Memory != 3*gi {
		t.Errorf("burstable with memory limits everywhere: shares %d quota %v memory %v", *b.CPUShares, b.CPUQuota, b.Memory)
	}
	b2 := PodConfig(pod(rr("cpu=100m", "memory=2Gi"), rr("cpu=100m", "")))
	if b2.Memory != nil {
		t.Errorf("burstable with a container without memory limit: memory %d, want none", *b2.Memory)
	}
	be := PodConfig(pod(rr("", "")))
	if *be.CPUShares != MinShares || be.Memory != nil || be.CPUQuota != nil {
		t.Errorf("besteffort: %+v", be)
	}
	h := PodConfig(pod(rr("cpu=1,memory=1Gi,hugepages-2Mi=4Mi", "cpu=1,memory=1Gi,hugepages-2Mi=4Mi")))
	if h.HugePages[2<<20] != 4<<20 {
		t.Errorf("hugepages: %v, want 2Mi pages limited to 4Mi", h.HugePages)
	}
	o := pod(rr("cpu=1,memory=1Gi", "cpu=1,memory=1Gi"))
	o.Spec.Overhead = MustList("cpu=250m,memory=120Mi")
	if oc := PodConfig(o); *oc.Memory != gi+120<<20 || *oc.CPUShares != 1280 {
		t.Errorf("overhead: memory %d shares %d, want the overhead added", *oc.Memory, *oc.CPUShares)
	}
}

// TestAllocatable: capacity minus reservations minus the hard memory
// threshold.
func TestAllocatable(t *testing.T) {
	capacity := MustList("cpu=4,memory=8Gi")
	hard, err := ParseThresholds("eviction-hard", "memory.available<500Mi,nodefs.available<10%")
	if err != nil {
		t.Fatal(err)
	}
	a := Allocatable(capacity, MustList("cpu=500m,memory=1Gi"), MustList("cpu=500m,memory=512Mi"), EvictionReserve(hard, capacity))
	if got := a.Cpu().MilliValue(); got != 3000 {
		t.Errorf("cpu %dm, want 3000m", got)
	}
	if got := a.Memory().Value(); got != 8*gi-gi-512<<20-500<<20 {
		t.Errorf("memory %d", got)
	}
	pct, _ := ParseThresholds("eviction-hard", "memory.available<10%")
	r := EvictionReserve(pct, capacity)
	if got := r.Memory().Value(); got != 858993459 {
		t.Errorf("10%% of 8Gi = %d", got)
	}
	// With ephemeral-storage in the capacity, nodefs.available is taken
	// from it.
	disk := MustList("cpu=4,memory=8Gi,ephemeral-storage=100Gi")
	d := Allocatable(disk, MustList("ephemeral-storage=1Gi"), nil, EvictionReserve(hard, disk))
	if got, want := d.StorageEphemeral().Value(), 100*gi-gi-10*gi; got != want {
		t.Errorf("ephemeral-storage %d, want %d (100Gi - 1Gi reserved - 10%% nodefs.available)", got, want)
	}
	if z := Allocatable(MustList("memory=1Gi"), MustList("memory=2Gi"), nil, nil); z.Memory().Value() != 0 {
		t.Errorf("over-reserved: %v, want 0", z.Memory())
	}
}

// TestParseErrors: bad flag values name the flag and the item.
func TestParseErrors(t *testing.T) {
	for _, s := range []string{"cpu", "gpu=1", "memory=lots", "memory=-1Gi"} {
		if _, err := ParseList("kube-reserved", s); err == nil {
			t.Errorf("ParseList(%q): no error", s)
		}
	}
	for _, s := range []string{"memory.available", "disk.available<1Gi", "memory.available<200%", "memory.available<1Gi,memory.available<2Gi"} {
		if _, err := ParseThresholds("eviction-hard", s); err == nil {
			t.Errorf("ParseThresholds(%q): no error", s)
		}
	}
	if _, err := ParseThresholds("eviction-hard", DefaultEvictionHard); err != nil {
		t.Errorf("default: %v", err)
	}
}

func TestHugePageSizeString(t *testing.T) {
	for size, want := range map[int64]string{2 << 20: "2MB", 1 << 30: "1GB", 64 << 10: "64KB"} {
		if got := HugePageSizeString(size); got != want {
			t.Errorf("%d: %q, want %q", size, got, want)
		}
	}
}
