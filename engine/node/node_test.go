package node

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func find(cs []v1.NodeCondition, t v1.NodeConditionType) v1.NodeCondition {
	for _, c := range cs {
		if c.Type == t {
			return c
		}
	}
	return v1.NodeCondition{}
}

// TestConditions reads like the node's contract: Ready follows health, the
// pressure conditions follow kubelet's hard eviction thresholds, and a
// condition's transition time moves only when its status does.
func TestConditions(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(10 * time.Second))
	fine := pressure{memAvail: 4 << 30, diskAvail: 50 << 30, diskTotal: 100 << 30, pidsUsed: 300, pidMax: 4 << 20}
	tests := []struct {
		name   string
		health error
		p      pressure
		want   map[v1.NodeConditionType]string // status/reason
	}{
		{"healthy", nil, fine, map[v1.NodeConditionType]string{
			v1.NodeReady: "True/KubeletReady", v1.NodeMemoryPressure: "False/KubeletHasSufficientMemory",
			v1.NodeDiskPressure: "False/KubeletHasNoDiskPressure", v1.NodePIDPressure: "False/KubeletHasSufficientPID"}},
		{"runtime down", errors.New("container runtime is down"), fine, map[v1.NodeConditionType]string{
			v1.NodeReady: "False/KubeletNotReady"}},
		{"low memory", nil, pressure{memAvail: 50 << 20, diskAvail: 50, diskTotal: 100, pidMax: 100}, map[v1.NodeConditionType]string{
			v1.NodeMemoryPressure: "True/KubeletHasInsufficientMemory", v1.NodeReady: "True/KubeletReady"}},
		{"disk almost full", nil, pressure{memAvail: 4 << 30, diskAvail: 5, diskTotal: 100, pidMax: 100}, map[v1.NodeConditionType]string{
			v1.NodeDiskPressure: "True/KubeletHasDiskPressure"}},
		{"pids almost exhausted", nil, pressure{memAvail: 4 << 30, diskAvail: 50, diskTotal: 100, pidsUsed: 95, pidMax: 100}, map[v1.NodeConditionType]string{
			v1.NodePIDPressure: "True/KubeletHasInsufficientPID"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := conditions(nil, t0, tt.health, tt.p)
			if len(cs) != 4 {
				t.Fatalf("%d conditions, want 4", len(cs))
			}
			for typ, want := range tt.want {
				c := find(cs, typ)
				if got := string(c.Status) + "/" + c.Reason; got != want {
					t.Errorf("%s = %s, want %s", typ, got, want)
				}
			}
			if tt.health != nil && find(cs, v1.NodeReady).Message != tt.health.Error() {
				t.Errorf("NotReady message %q, want the health error", find(cs, v1.NodeReady).Message)
			}
		})
	}
	t.Run("the eviction manager's conditions", func(t *testing.T) {
		n := &Node{cfg: Config{Pressure: func() map[v1.NodeConditionType]bool {
			return map[v1.NodeConditionType]bool{v1.NodeDiskPressure: true}
		}}}
		cs := n.conditions(nil, t0)
		for typ, want := range map[v1.NodeConditionType]string{v1.NodeMemoryPressure: "False/KubeletHasSufficientMemory",
			v1.NodeDiskPressure: "True/KubeletHasDiskPressure", v1.NodePIDPressure: "False/KubeletHasSufficientPID", v1.NodeReady: "True/KubeletReady"} {
			if c := find(cs, typ); string(c.Status)+"/"+c.Reason != want {
				t.Errorf("%s = %s/%s, want %s", typ, c.Status, c.Reason, want)
			}
		}
	})
	t.Run("transition time moves only with the status", func(t *testing.T) {
		first := conditions(nil, t0, nil, fine)
		same := conditions(first, t1, nil, fine)
		if c := find(same, v1.NodeReady); !c.LastTransitionTime.Equal(&t0) || !c.LastHeartbeatTime.Equal(&t1) {
			t.Errorf("unchanged Ready: transition %s heartbeat %s, want %s and %s", c.LastTransitionTime, c.LastHeartbeatTime, t0, t1)
		}
		down := conditions(first, t1, errors.New("down"), fine)
		if c := find(down, v1.NodeReady); !c.LastTransitionTime.Equal(&t1) {
			t.Errorf("Ready went False: transition %s, want %s", c.LastTransitionTime, t1)
		}
	})
}

// TestStatusAllocatable: the Node's capacity is the machine's (cpu, memory
// given, ephemeral-storage of the root dir, pods = max pods) and its
// allocatable is what Config.Allocatable computes from that capacity, not
// the capacity itself.
func TestStatusAllocatable(t *testing.T) {
	n := New(Config{
		Name: "n", MaxPods: 110, RootDir: t.TempDir(),
		Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("8Gi")},
		Allocatable: func(c v1.ResourceList) v1.ResourceList {
			out := c.DeepCopy()
			m := out[v1.ResourceMemory]
			m.Sub(resource.MustParse("1Gi"))
			out[v1.ResourceMemory] = m
			return out
		},
	})
	st := n.status(context.Background(), nil)
	if got := st.Capacity.Memory().String(); got != "8Gi" {
		t.Errorf("capacity memory %s, want 8Gi", got)
	}
	if got := st.Allocatable.Memory().String(); got != "7Gi" {
		t.Errorf("allocatable memory %s, want 7Gi (capacity - what Allocatable takes)", got)
	}
	if got := st.Capacity.Pods().Value(); got != 110 {
		t.Errorf("capacity pods %d, want 110", got)
	}
	if st.Capacity.StorageEphemeral().IsZero() || !st.Allocatable.StorageEphemeral().Equal(*st.Capacity.StorageEphemeral()) {
		t.Errorf("ephemeral-storage capacity %s allocatable %s, want the root dir's size in both", st.Capacity.StorageEphemeral(), st.Allocatable.StorageEphemeral())
	}
	// Without a computed capacity the machine's is read.
	m := New(Config{Name: "m", RootDir: t.TempDir()}).status(context.Background(), nil)
	if m.Capacity.Memory().IsZero() || m.Capacity.Cpu().IsZero() {
		t.Errorf("machine capacity %v: want cpu and memory", m.Capacity)
	}
}

// TestTransitionEvents: kubelet's node status events, recorded when a
// pressure condition appears or changes and when an existing Ready
// condition changes.
func TestTransitionEvents(t *testing.T) {
	cond := func(typ v1.NodeConditionType, s v1.ConditionStatus) v1.NodeCondition {
		return v1.NodeCondition{Type: typ, Status: s}
	}
	T, F := v1.ConditionTrue, v1.ConditionFalse
	fine := []v1.NodeCondition{cond(v1.NodeMemoryPressure, F), cond(v1.NodeDiskPressure, F), cond(v1.NodePIDPressure, F), cond(v1.NodeReady, T)}
	tests := []struct {
		name       string
		prev, next []v1.NodeCondition
		want       string
	}{
		{"first status of a new node", nil, fine,
			"NodeHasSufficientMemory NodeHasNoDiskPressure NodeHasSufficientPID"},
		{"nothing changed", fine, fine, ""},
		{"memory pressure begins", fine,
			[]v1.NodeCondition{cond(v1.NodeMemoryPressure, T), cond(v1.NodeDiskPressure, F), cond(v1.NodePIDPressure, F), cond(v1.NodeReady, T)},
			"NodeHasInsufficientMemory"},
		{"disk and PID pressure, not ready", fine,
			[]v1.NodeCondition{cond(v1.NodeMemoryPressure, F), cond(v1.NodeDiskPressure, T), cond(v1.NodePIDPressure, T), cond(v1.NodeReady, F)},
			"NodeHasDiskPressure NodeHasInsufficientPID NodeNotReady"},
		{"pressure ends, ready again",
			[]v1.NodeCondition{cond(v1.NodeMemoryPressure, T), cond(v1.NodeDiskPressure, T), cond(v1.NodePIDPressure, T), cond(v1.NodeReady, F)},
			fine, "NodeHasSufficientMemory NodeHasNoDiskPressure NodeHasSufficientPID NodeReady"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(transitionEvents(tt.prev, tt.next), " "); got != tt.want {
				t.Errorf("events %q, want %q", got, tt.want)
			}
		})
	}
}

// TestStatusWriteRecordsEvents: the status loop records kubelet's events
// with its message, once per change, after the write.
func TestStatusWriteRecordsEvents(t *testing.T) {
	cs := fake.NewSimpleClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
	pressured := false
	var got []string
	n := New(Config{Client: cs, Name: "node-a", IP: "127.0.0.1", MaxPods: 10,
		Capacity: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
		Pressure: func() map[v1.NodeConditionType]bool {
			return map[v1.NodeConditionType]bool{v1.NodeMemoryPressure: pressured}
		},
		Event: func(eventType, reason, message string) { got = append(got, eventType+" "+reason+": "+message) },
	})
	ctx := context.Background()
	step := func(want ...string) {
		t.Helper()
		got = nil
		if _, err := n.updateStatus(ctx); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	step("Normal NodeHasSufficientMemory: Node node-a status is now: NodeHasSufficientMemory",
		"Normal NodeHasNoDiskPressure: Node node-a status is now: NodeHasNoDiskPressure",
		"Normal NodeHasSufficientPID: Node node-a status is now: NodeHasSufficientPID")
	step()
	pressured = true
	step("Normal NodeHasInsufficientMemory: Node node-a status is now: NodeHasInsufficientMemory")
	step()
	pressured = false
	step("Normal NodeHasSufficientMemory: Node node-a status is now: NodeHasSufficientMemory")
}

// TestNodeStatusWrittenOnChangeOrReport: the status computed every update
// period is written (a strategic merge patch of nodes/status) the first
// time, then only when something but the heartbeat changed or the report
// period passed since the last write; volumesAttached, which the
// attach-detach controller owns, is kept. The Lease is renewed with one
// update each time once it exists.
func TestNodeStatusWrittenOnChangeOrReport(t *testing.T) {
	cs := fake.NewSimpleClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status: v1.NodeStatus{VolumesAttached: []v1.AttachedVolume{{Name: "kubernetes.io/csi/vol", DevicePath: "/dev/x"}}}})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	healthy := error(nil)
	n := New(Config{Client: cs, Name: "node-a", IP: "127.0.0.1", MaxPods: 10,
		Capacity: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
		Pressure: func() map[v1.NodeConditionType]bool { return nil },
		Health:   func() error { return healthy },
		Now:      func() time.Time { return now },
	})
	ctx := context.Background()
	var wrote []bool
	for i, step := range []func(){
		func() {}, // first: written
		func() { now = now.Add(10 * time.Second) },             // unchanged: not
		func() { now = now.Add(10 * time.Second) },             // unchanged: not
		func() { healthy = errors.New("PLEG is not healthy") }, // Ready changes: written
		func() { now = now.Add(4 * time.Minute) },              // unchanged, 4m since: not
		func() { now = now.Add(time.Minute) },                  // 5m since the last write: written
	} {
		step()
		w, err := n.updateStatus(ctx)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		wrote = append(wrote, w)
	}
	if want := []bool{true, false, false, true, false, true}; fmt.Sprint(wrote) != fmt.Sprint(want) {
		t.Errorf("written %v, want %v", wrote, want)
	}
	var writes []string
	for _, a := range cs.Actions() {
		if a.GetVerb() == "get" {
			continue
		}
		p, ok := a.(k8stesting.PatchAction)
		if !ok || p.GetSubresource() != "status" || p.GetPatchType() != types.StrategicMergePatchType {
			t.Errorf("%s %s/%s, want strategic merge patches of nodes/status", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
			continue
		}
		writes = append(writes, string(p.GetPatch()))
	}
	if len(writes) != 3 {
		t.Errorf("%d node status writes, want 3", len(writes))
	}
	got, _ := cs.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if len(got.Status.VolumesAttached) != 1 {
		t.Errorf("volumesAttached %v, want the controller's kept", got.Status.VolumesAttached)
	}
	if ready := got.Status.Conditions[3]; ready.Type != v1.NodeReady || ready.Status != v1.ConditionFalse || !ready.LastHeartbeatTime.Time.Equal(now) {
		t.Errorf("Ready %+v, want False with heartbeat %s", ready, now)
	}

	cs.ClearActions()
	for range 3 {
		if err := n.renewLease(ctx); err != nil {
			t.Fatal(err)
		}
		now = now.Add(n.cfg.LeasePeriod)
	}
	var verbs []string
	for _, a := range cs.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	if want := "get create update update"; strings.Join(verbs, " ") != want {
		t.Errorf("lease requests %q, want %q", strings.Join(verbs, " "), want)
	}
	if n.cfg.LeasePeriod != 10*time.Second {
		t.Errorf("lease renew period %s, want 10s (0.25 of 40s)", n.cfg.LeasePeriod)
	}
}

// TestStatusExtended: the device plugins' resources are in the Node's
// capacity and allocatable as Config.Extended gives them, beside the
// machine's.
func TestStatusExtended(t *testing.T) {
	n := New(Config{
		Name: "n", MaxPods: 10, RootDir: t.TempDir(),
		Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("8Gi")},
		Extended: func() (v1.ResourceList, v1.ResourceList) {
			return v1.ResourceList{"example.com/dev": resource.MustParse("2")}, v1.ResourceList{"example.com/dev": resource.MustParse("0")}
		},
	})
	st := n.status(context.Background(), nil)
	c, a := st.Capacity["example.com/dev"], st.Allocatable["example.com/dev"]
	if c.Value() != 2 || a.Value() != 0 {
		t.Errorf("example.com/dev capacity %s allocatable %s, want 2 and 0", c.String(), a.String())
	}
	if st.Capacity.Cpu().Value() != 2 || st.Allocatable.Cpu().Value() != 2 {
		t.Errorf("cpu capacity %s allocatable %s, want 2 and 2", st.Capacity.Cpu(), st.Allocatable.Cpu())
	}
}

// TestStatusRuntimeFeatures: status.features and status.runtimeHandlers
// are written from the runtime's (kubelet's NodeFeatures and
// RuntimeHandlers setters); a runtime that reports no features (nil)
// leaves status.features as it was.
func TestStatusRuntimeFeatures(t *testing.T) {
	cs := fake.NewSimpleClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
	yes, no := true, false
	features := &v1.NodeFeatures{SupplementalGroupsPolicy: &yes}
	handlers := []v1.NodeRuntimeHandler{{Name: "", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &yes, UserNamespaces: &no}}}
	n := New(Config{Client: cs, Name: "node-a", IP: "127.0.0.1", MaxPods: 10, RootDir: t.TempDir(),
		Capacity:        v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
		RuntimeFeatures: func() (*v1.NodeFeatures, []v1.NodeRuntimeHandler) { return features, handlers },
	})
	ctx := context.Background()
	check := func(wantFeatures *v1.NodeFeatures, wantHandlers []v1.NodeRuntimeHandler) {
		t.Helper()
		if _, err := n.updateStatus(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := cs.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Status.Features, wantFeatures) || !reflect.DeepEqual(got.Status.RuntimeHandlers, wantHandlers) {
			t.Errorf("features %+v handlers %+v, want %+v %+v", got.Status.Features, got.Status.RuntimeHandlers, wantFeatures, wantHandlers)
		}
	}
	check(features, handlers)
	written := features
	features, handlers = nil, nil
	check(written, nil)
}
