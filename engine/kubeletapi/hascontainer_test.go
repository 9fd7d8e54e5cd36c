package kubeletapi

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestHasContainer(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers:      []v1.Container{{Name: "init"}},
		Containers:          []v1.Container{{Name: "app"}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger"}}},
	}}
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"init", true},
		{"app", true},
		{"debugger", true},
		{"other", false},
	} {
		if got := hasContainer(pod, tc.name); got != tc.want {
			t.Errorf("hasContainer(%q) = %t, want %t", tc.name, got, tc.want)
		}
	}
}
