package config

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestAPIPodsTerminal: a pod already Succeeded or Failed when the node first
// lists it is left out (it never runs); a pod that becomes terminal while
// listed stays listed until it is deleted, so its status and logs stay
// readable as under kubelet; mirror pods are never handed on.
func TestAPIPodsTerminal(t *testing.T) {
	apiPod := func(name string, phase v1.PodPhase) *v1.Pod {
		p := pod(name, name+"-uid")
		p.Annotations = nil
		p.Status.Phase = phase
		return p
	}
	mirror := apiPod("static-n", v1.PodRunning)
	mirror.Annotations = map[string]string{AnnotationMirror: "h"}
	listed := map[types.UID]bool{}
	names := func(objs ...*v1.Pod) []string {
		in := make([]any, len(objs))
		for i, p := range objs {
			in[i] = p
		}
		var out []string
		for _, p := range apiPods(in, listed) {
			if p.Annotations[AnnotationSource] != SourceAPI {
				t.Errorf("%s: source annotation %q, want api", p.Name, p.Annotations[AnnotationSource])
			}
			out = append(out, p.Name)
		}
		return out
	}
	for _, step := range []struct {
		what string
		pods []*v1.Pod
		want []string
	}{
		{"first list", []*v1.Pod{apiPod("done-before", v1.PodSucceeded), apiPod("job", v1.PodRunning), mirror}, []string{"job"}},
		{"the job completes", []*v1.Pod{apiPod("done-before", v1.PodSucceeded), apiPod("job", v1.PodSucceeded), mirror}, []string{"job"}},
		{"a failed pod appears", []*v1.Pod{apiPod("job", v1.PodSucceeded), apiPod("late", v1.PodFailed)}, []string{"job"}},
		{"the job is deleted", []*v1.Pod{apiPod("late", v1.PodFailed)}, nil},
		{"a pod of the job's UID comes back terminal", []*v1.Pod{apiPod("job", v1.PodSucceeded)}, nil},
	} {
		if got := names(step.pods...); !reflect.DeepEqual(got, step.want) {
			t.Errorf("%s: handed on %q, want %q", step.what, got, step.want)
		}
	}
}
