package podspec

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// TestRuntimeFeaturesOf reads the Status replies of containerd 2.x (its
// handlers and features) and 1.6 (neither), and what the Node shows of
// them.
func TestRuntimeFeaturesOf(t *testing.T) {
	v2 := RuntimeFeaturesOf(&runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{
			{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true, UserNamespaces: true}},
			{Name: "runc", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}},
			{Name: "bare"},
		},
		Features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true},
	})
	if !v2.SupportsSupplementalGroupsPolicy() {
		t.Error("containerd 2.x: supplemental groups policy not supported")
	}
	for name, want := range map[string]RuntimeHandler{
		"":        {Name: "", RecursiveReadOnlyMounts: true, UserNamespaces: true},
		"runc":    {Name: "runc", RecursiveReadOnlyMounts: true},
		"bare":    {Name: "bare"},
		"unknown": {Name: "unknown"},
	} {
		if got := v2.Handler(name); got != want {
			t.Errorf("handler %q: %+v, want %+v", name, got, want)
		}
	}
	features, handlers := v2.NodeStatus()
	wantHandlers := []v1.NodeRuntimeHandler{
		{Name: "", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(true)}},
		{Name: "runc", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(false)}},
		{Name: "bare", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(false), UserNamespaces: ptr.To(false)}},
	}
	if !reflect.DeepEqual(features, &v1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)}) || !reflect.DeepEqual(handlers, wantHandlers) {
		t.Errorf("node status: %+v %+v", features, handlers)
	}

	v16 := RuntimeFeaturesOf(&runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}})
	if v16.SupportsSupplementalGroupsPolicy() || v16.Handler("") != (RuntimeHandler{}) {
		t.Errorf("containerd 1.6: %+v", v16)
	}
	if features, handlers := v16.NodeStatus(); features != nil || len(handlers) != 0 {
		t.Errorf("containerd 1.6 node status: %+v %+v", features, handlers)
	}
	var none *RuntimeFeatures
	if none.SupportsSupplementalGroupsPolicy() || none.Handler("").RecursiveReadOnlyMounts {
		t.Error("features not read yet support something")
	}
}
