package eviction

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/speclet/speclet/engine/resources"
)

const mi = int64(1) << 20

func thresholds(t *testing.T, s string) []resources.Threshold {
	t.Helper()
	th, err := resources.ParseThresholds("eviction", s)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

func mem(avail int64) Observations {
	return Observations{"memory.available": {Available: avail, Capacity: 1000 * mi}}
}

// TestHardThreshold: a hard threshold is met at once, sets MemoryPressure,
// and the condition stays for the transition period after the last breach.
func TestHardThreshold(t *testing.T) {
	m := NewManager(Config{Hard: thresholds(t, "memory.available<100Mi"), Transition: time.Minute})
	t0 := time.Unix(0, 0)
	if d := m.Observe(t0, mem(200*mi)); d.Signal != "" || m.Conditions()[MemoryPressure] {
		t.Fatalf("200Mi available: %+v %v, want nothing", d, m.Conditions())
	}
	d := m.Observe(t0.Add(time.Second), mem(50*mi))
	if d.Signal != "memory.available" || !d.Hard || d.Threshold != 100*mi || d.Available != 50*mi {
		t.Fatalf("50Mi available: %+v, want the hard memory threshold", d)
	}
	if d.Message() != "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. " {
		t.Errorf("message %q", d.Message())
	}
	if !m.Conditions()[MemoryPressure] || m.Conditions()[DiskPressure] {
		t.Errorf("conditions %v, want MemoryPressure only", m.Conditions())
	}
	m.Observe(t0.Add(30*time.Second), mem(500*mi))
	if !m.Conditions()[MemoryPressure] {
		t.Error("MemoryPressure cleared within the transition period")
	}
	m.Observe(t0.Add(62*time.Second), mem(500*mi))
	if m.Conditions()[MemoryPressure] {
		t.Error("MemoryPressure still set after the transition period")
	}
}

// TestSoftThresholdGrace: a soft threshold acts only once it has been met
// for its whole grace period; a recovery in between restarts the clock.
func TestSoftThresholdGrace(t *testing.T) {
	m := NewManager(Config{Soft: thresholds(t, "memory.available<300Mi"), Grace: map[string]time.Duration{"memory.available": 90 * time.Second}})
	t0 := time.Unix(0, 0)
	for _, step := range []struct {
		at    time.Duration
		avail int64
		act   bool
	}{
		{0, 200 * mi, false},
		{60 * time.Second, 200 * mi, false},
		{70 * time.Second, 400 * mi, false}, // recovered: the grace starts over
		{80 * time.Second, 200 * mi, false},
		{160 * time.Second, 200 * mi, false},
		{170 * time.Second, 200 * mi, true},
	} {
		d := m.Observe(t0.Add(step.at), mem(step.avail))
		if (d.Signal != "") != step.act || d.Hard {
			t.Errorf("at %s with %dMi: decision %+v, want act=%v (soft)", step.at, step.avail/mi, d, step.act)
		}
	}
	if !m.Conditions()[MemoryPressure] {
		t.Error("soft threshold crossed: MemoryPressure not set")
	}
}

// TestMinimumReclaim: once met, a threshold stays met until available
// passes the threshold plus the minimum reclaim.
func TestMinimumReclaim(t *testing.T) {
	m := NewManager(Config{Hard: thresholds(t, "memory.available<100Mi"),
		MinReclaim: map[string]resource.Quantity{"memory.available": resource.MustParse("50Mi")}})
	t0 := time.Unix(0, 0)
	if d := m.Observe(t0, mem(120*mi)); d.Signal != "" {
		t.Fatalf("120Mi before any breach: %+v, want nothing", d)
	}
	m.Observe(t0, mem(90*mi))
	if d := m.Observe(t0, mem(120*mi)); d.Signal != "memory.available" {
		t.Errorf("120Mi after a breach with 50Mi minimum reclaim: %+v, want still met", d)
	}
	if d := m.Observe(t0, mem(160*mi)); d.Signal != "" {
		t.Errorf("160Mi: %+v, want reclaimed", d)
	}
}

// TestSignalsAndConditions: disk and PID signals set their conditions,
// percentages count against capacity, memory is acted on first.
func TestSignalsAndConditions(t *testing.T) {
	m := NewManager(Config{Hard: thresholds(t, "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,pid.available<100")})
	d := m.Observe(time.Unix(0, 0), Observations{
		"memory.available":  {Available: 50 * mi, Capacity: 1000 * mi},
		"nodefs.available":  {Available: 5, Capacity: 100},
		"nodefs.inodesFree": {Available: 50, Capacity: 100},
		"imagefs.available": {Available: 20, Capacity: 100},
		"pid.available":     {Available: 10, Capacity: 4096},
	})
	if d.Signal != "memory.available" || len(d.Met) != 3 {
		t.Errorf("decision %+v, want memory first and memory, nodefs, pid met", d)
	}
	c := m.Conditions()
	if !c[MemoryPressure] || !c[DiskPressure] || !c[PIDPressure] {
		t.Errorf("conditions %v, want all three", c)
	}
}

func pod(name string, qos string, prio int32) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Priority: &prio}}
	c := v1.Container{Name: "c"}
	switch qos {
	case "guaranteed":
		c.Resources = v1.ResourceRequirements{Requests: resources.MustList("cpu=1,memory=100Mi"), Limits: resources.MustList("cpu=1,memory=100Mi")}
	case "burstable":
		c.Resources = v1.ResourceRequirements{Requests: resources.MustList("memory=100Mi")}
	}
	p.Spec.Containers = []v1.Container{c}
	return p
}

// TestRankMemory: kubelet's order under memory pressure: usage above
// requests first, then lower priority, then the most usage above requests;
// static and system-critical pods are never candidates.
func TestRankMemory(t *testing.T) {
	critical := pod("critical", "", 2000000000)
	got := Rank("memory.available", []PodUsage{
		{Pod: pod("guaranteed", "guaranteed", 0), Usage: 40 * mi},     // 60Mi under its request
		{Pod: pod("burstable-under", "burstable", 0), Usage: 50 * mi}, // 50Mi under: closer to its request, so before
		{Pod: pod("besteffort-small", "", 0), Usage: 10 * mi},
		{Pod: pod("besteffort-big", "", 0), Usage: 300 * mi},
		{Pod: pod("burstable-over-high-prio", "burstable", 1000), Usage: 400 * mi},
		{Pod: pod("static", "", 0), Static: true, Usage: 999 * mi},
		{Pod: critical, Usage: 999 * mi},
	})
	var names []string
	for _, p := range got {
		names = append(names, p.Pod.Name)
	}
	want := []string{"besteffort-big", "besteffort-small", "burstable-over-high-prio", "burstable-under", "guaranteed"}
	if len(names) != len(want) {
		t.Fatalf("ranked %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("ranked %v, want %v", names, want)
		}
	}
}

// TestAdmit: under MemoryPressure BestEffort pods are refused and others
// admitted; under DiskPressure only critical pods; static pods always.
func TestAdmit(t *testing.T) {
	m := NewManager(Config{Hard: thresholds(t, "memory.available<100Mi,nodefs.available<10%")})
	m.Observe(time.Unix(0, 0), mem(50*mi))
	if ok, msg := m.Admit(pod("be", "", 0), false); ok || msg != "The node had condition: [MemoryPressure]. " {
		t.Errorf("BestEffort under MemoryPressure: %v %q", ok, msg)
	}
	if ok, _ := m.Admit(pod("bu", "burstable", 0), false); !ok {
		t.Error("Burstable under MemoryPressure refused")
	}
	m.Observe(time.Unix(1, 0), Observations{"nodefs.available": {Available: 1, Capacity: 100}})
	if ok, _ := m.Admit(pod("bu", "burstable", 0), false); ok {
		t.Error("Burstable under DiskPressure admitted")
	}
	if ok, _ := m.Admit(pod("st", "", 0), true); !ok {
		t.Error("static pod refused")
	}
}

func TestParseGrace(t *testing.T) {
	g, err := ParseGrace("eviction-soft-grace-period", "memory.available=1m30s,nodefs.available=2m")
	if err != nil || g["memory.available"] != 90*time.Second || g["nodefs.available"] != 2*time.Minute {
		t.Errorf("%v %v", g, err)
	}
	for _, s := range []string{"memory=1m", "memory.available=soon", "memory.available"} {
		if _, err := ParseGrace("eviction-soft-grace-period", s); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
}

// BenchmarkHousekeeping1000 is one eviction check at 1,000 pods: observe
// the signals and rank every pod for memory (docs/performance.md).
func BenchmarkHousekeeping1000(b *testing.B) {
	hard, _ := resources.ParseThresholds("eviction-hard", resources.DefaultEvictionHard)
	m := NewManager(Config{Hard: hard})
	pods := make([]PodUsage, 1000)
	for i := range pods {
		kind := []string{"guaranteed", "burstable", ""}[i%3]
		pods[i] = PodUsage{Pod: pod("p", kind, int32(i%5)), Usage: int64(i%200) * mi}
	}
	now := time.Unix(0, 0)
	for b.Loop() {
		now = now.Add(10 * time.Second)
		if d := m.Observe(now, mem(50*mi)); d.Signal != "" {
			Rank(d.Signal, pods)
		}
	}
}

// TestAllocatableMemory: with node allocatable enforced, the pods' memory
// under their cgroup's limit is judged by memory.available's hard
// threshold: the host may have plenty while the pods are at their limit.
func TestAllocatableMemory(t *testing.T) {
	hard := WithAllocatableMemory(thresholds(t, "memory.available<100Mi,nodefs.available<10%"))
	var got []string
	for _, th := range hard {
		got = append(got, th.Signal+"<"+th.Quantity.String())
		if th.Quantity == nil {
			got[len(got)-1] = th.Signal
		}
	}
	if want := "memory.available<100Mi nodefs.available allocatableMemory.available<100Mi"; strings.Join(got, " ") != want {
		t.Fatalf("thresholds %v, want %s", got, want)
	}
	m := NewManager(Config{Hard: hard})
	obs := Observations{"memory.available": {Available: 20000 * mi, Capacity: 24000 * mi},
		AllocatableMemory: {Available: 60 * mi, Capacity: 400 * mi}}
	d := m.Observe(time.Unix(0, 0), obs)
	if d.Signal != AllocatableMemory || !d.Hard || d.Available != 60*mi {
		t.Fatalf("decision %+v, want the hard allocatableMemory.available threshold", d)
	}
	if want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi. "; d.Message() != want {
		t.Errorf("message %q, want %q", d.Message(), want)
	}
	if !m.Conditions()[MemoryPressure] {
		t.Errorf("conditions %v, want MemoryPressure", m.Conditions())
	}
	if ok, msg := m.Admit(&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}, false); ok || msg != "The node had condition: [MemoryPressure]. " {
		t.Errorf("BestEffort admission under allocatable pressure: %v %q", ok, msg)
	}
}
