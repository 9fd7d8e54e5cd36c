package apistatus

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/speclet/speclet/engine/config"
)

// staticPod is a file pod whose config hash is its UID.
func staticPod(uid string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node-a", Namespace: "default", UID: types.UID(uid), Annotations: map[string]string{
			config.AnnotationSource: config.SourceFile, config.AnnotationHash: uid,
		}},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
}

// mirrorOf is the API's mirror pod of the static pod of hash uid.
func mirrorOf(uid string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node-a", Namespace: "default", UID: types.UID("mirror-" + uid), Annotations: map[string]string{
			config.AnnotationMirror: uid,
		}},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
}

// mirrorWrites lists the deletes and creates of pods among the actions.
func mirrorWrites(cs *fake.Clientset) []string {
	var out []string
	for _, a := range cs.Actions() {
		switch act := a.(type) {
		case k8stesting.DeleteAction:
			o := act.GetDeleteOptions()
			out = append(out, fmt.Sprintf("delete grace=%d uid=%s", *o.GracePeriodSeconds, *o.Preconditions.UID))
		case k8stesting.CreateAction:
			p := act.GetObject().(*v1.Pod)
			out = append(out, "create mirror="+p.Annotations[config.AnnotationMirror])
		}
	}
	cs.ClearActions()
	return out
}

// TestMirrorPodLifetime: kubelet's mirror pod rules. An outdated mirror pod
// (the manifest changed: a new UID of the same name) and an orphaned one
// (the manifest is gone) stay while the static pod they mirror terminates,
// and go once it stopped, the outdated one replaced by the new pod's; a
// mirror pod that someone deleted gracefully is deleted with grace 0 and
// created again at once, since nobody else ends it.
func TestMirrorPodLifetime(t *testing.T) {
	ctx := context.Background()
	now := metav1.Now()
	marked := mirrorOf("u1")
	marked.DeletionTimestamp = &now
	for _, tc := range []struct {
		name       string
		declared   []*v1.Pod
		mirror     *v1.Pod
		terminated []string // writes once the old pod stopped
		meanwhile  []string // writes while it terminates
	}{
		{"manifest changed", []*v1.Pod{staticPod("u2")}, mirrorOf("u1"),
			[]string{"delete grace=0 uid=mirror-u1", "create mirror=u2"}, nil},
		{"manifest removed", nil, mirrorOf("u1"),
			[]string{"delete grace=0 uid=mirror-u1"}, nil},
		{"mirror deleted gracefully", []*v1.Pod{staticPod("u1")}, marked,
			[]string{"delete grace=0 uid=mirror-u1", "create mirror=u1"},
			[]string{"delete grace=0 uid=mirror-u1", "create mirror=u1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, stopped := range []bool{false, true} {
				cs := fake.NewSimpleClientset(tc.mirror.DeepCopy())
				eng := &fakeEngine{pods: tc.declared, stopped: stopped}
				m := New(Config{Client: cs, Engine: eng, Pods: cache{cs}, NodeName: "node-a", NodeUID: func() types.UID { return "n" }})
				m.pass(ctx)
				want := tc.meanwhile
				if stopped {
					want = tc.terminated
				}
				if got := mirrorWrites(cs); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("old pod stopped=%v: %q, want %q", stopped, got, want)
				}
			}
		})
	}
}
