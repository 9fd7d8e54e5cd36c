package podstatus

import (
	"reflect"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEqualKnowsEveryField: Equal compares every field of the status types
// it walks; a field the API adds must be added to Equal, then here.
func TestEqualKnowsEveryField(t *testing.T) {
	for _, tc := range []struct {
		typ    reflect.Type
		fields []string
	}{
		{reflect.TypeFor[v1.PodStatus](), []string{"ObservedGeneration", "Phase", "Conditions", "Message", "Reason",
			"NominatedNodeName", "HostIP", "HostIPs", "PodIP", "PodIPs", "StartTime", "InitContainerStatuses",
			"ContainerStatuses", "QOSClass", "EphemeralContainerStatuses", "Resize", "ResourceClaimStatuses",
			"ExtendedResourceClaimStatus"}},
		{reflect.TypeFor[v1.ContainerStatus](), []string{"Name", "State", "LastTerminationState", "Ready",
			"RestartCount", "Image", "ImageID", "ContainerID", "Started", "AllocatedResources", "Resources",
			"VolumeMounts", "User", "AllocatedResourcesStatus", "StopSignal"}},
		{reflect.TypeFor[v1.ContainerState](), []string{"Waiting", "Running", "Terminated"}},
	} {
		var got []string
		for i := range tc.typ.NumField() {
			got = append(got, tc.typ.Field(i).Name)
		}
		if !slices.Equal(got, tc.fields) {
			t.Errorf("%s has fields %v; Equal compares %v", tc.typ, got, tc.fields)
		}
	}
	// The types Equal compares with == must stay comparable.
	for _, typ := range []reflect.Type{reflect.TypeFor[v1.PodCondition](), reflect.TypeFor[v1.HostIP](), reflect.TypeFor[v1.PodIP](),
		reflect.TypeFor[v1.ContainerStateWaiting](), reflect.TypeFor[v1.ContainerStateRunning](), reflect.TypeFor[v1.ContainerStateTerminated]()} {
		if !typ.Comparable() {
			t.Errorf("%s is not comparable", typ)
		}
	}
}

// TestEqual: a status equals its deep copy, and differs when any field
// Compute fills in, or a rarer one, differs.
func TestEqual(t *testing.T) {
	now := metav1.NewTime(time.Unix(1700000000, 0))
	tr := true
	base := func() *v1.PodStatus {
		return &v1.PodStatus{Phase: v1.PodRunning, QOSClass: v1.PodQOSBestEffort, HostIP: "10.0.0.1", PodIP: "10.0.0.2",
			HostIPs: []v1.HostIP{{IP: "10.0.0.1"}}, PodIPs: []v1.PodIP{{IP: "10.0.0.2"}}, StartTime: &now,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true, Started: &tr, Image: "busybox", ImageID: "sha256:1",
				ContainerID: "cri://a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
				LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}},
		}
	}
	if a := base(); !Equal(a, a.DeepCopy()) {
		t.Fatal("a status differs from its deep copy")
	}
	for name, change := range map[string]func(*v1.PodStatus){
		"phase":            func(s *v1.PodStatus) { s.Phase = v1.PodPending },
		"condition status": func(s *v1.PodStatus) { s.Conditions[0].Status = v1.ConditionFalse },
		"condition time":   func(s *v1.PodStatus) { s.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(time.Second)) },
		"one more":         func(s *v1.PodStatus) { s.Conditions = append(s.Conditions, v1.PodCondition{Type: v1.PodScheduled}) },
		"start time":       func(s *v1.PodStatus) { s.StartTime = nil },
		"pod IPs":          func(s *v1.PodStatus) { s.PodIPs = nil },
		"ready":            func(s *v1.PodStatus) { s.ContainerStatuses[0].Ready = false },
		"started":          func(s *v1.PodStatus) { f := false; s.ContainerStatuses[0].Started = &f },
		"state": func(s *v1.PodStatus) {
			s.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "x"}}
		},
		"last exit code": func(s *v1.PodStatus) { s.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode = 2 },
		"restarts":       func(s *v1.PodStatus) { s.ContainerStatuses[0].RestartCount = 1 },
		"init statuses":  func(s *v1.PodStatus) { s.InitContainerStatuses = []v1.ContainerStatus{{Name: "i"}} },
		"ephemeral":      func(s *v1.PodStatus) { s.EphemeralContainerStatuses = []v1.ContainerStatus{{Name: "e"}} },
		"resources":      func(s *v1.PodStatus) { s.ContainerStatuses[0].Resources = &v1.ResourceRequirements{} },
		"allocated": func(s *v1.PodStatus) {
			s.ContainerStatuses[0].AllocatedResources = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
		},
		"volume mounts":       func(s *v1.PodStatus) { s.ContainerStatuses[0].VolumeMounts = []v1.VolumeMountStatus{{Name: "v"}} },
		"stop signal":         func(s *v1.PodStatus) { sig := v1.SIGTERM; s.ContainerStatuses[0].StopSignal = &sig },
		"claims":              func(s *v1.PodStatus) { s.ResourceClaimStatuses = []v1.PodResourceClaimStatus{{Name: "c"}} },
		"extended claims":     func(s *v1.PodStatus) { s.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{} },
		"observed generation": func(s *v1.PodStatus) { s.ObservedGeneration = 2 },
	} {
		a, b := base(), base()
		change(b)
		if Equal(a, b) || Equal(b, a) {
			t.Errorf("%s: statuses equal", name)
		}
	}
}

// TestEqualAllocates: comparing two running statuses allocates nothing.
func TestEqualAllocates(t *testing.T) {
	now := metav1.Now()
	a := &v1.PodStatus{Phase: v1.PodRunning, StartTime: &now, Conditions: []v1.PodCondition{{Type: v1.PodReady}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}}}}}
	b := a.DeepCopy()
	if n := testing.AllocsPerRun(100, func() { Equal(a, b) }); n != 0 {
		t.Errorf("Equal allocates %v times, want 0", n)
	}
}
