package apistatus

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestMergeKeepsOthersConditions: the engine's status replaces the API's,
// except conditions the engine does not write (the scheduler's, a
// readiness gate's) and fields others own.
func TestMergeKeepsOthersConditions(t *testing.T) {
	api := v1.PodStatus{
		Phase:             v1.PodPending,
		NominatedNodeName: "n1",
		Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
			{Type: "example.com/gate", Status: v1.ConditionFalse},
			{Type: v1.PodReady, Status: v1.ConditionFalse},
		},
	}
	ours := v1.PodStatus{
		Phase:      v1.PodRunning,
		Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
	}
	got := merge(api, ours)
	if got.Phase != v1.PodRunning || got.NominatedNodeName != "n1" {
		t.Errorf("phase %s nominated %q, want Running and n1", got.Phase, got.NominatedNodeName)
	}
	want := map[v1.PodConditionType]v1.ConditionStatus{v1.PodReady: v1.ConditionTrue, v1.PodScheduled: v1.ConditionTrue, "example.com/gate": v1.ConditionFalse}
	if len(got.Conditions) != len(want) {
		t.Fatalf("conditions %+v, want %v", got.Conditions, want)
	}
	for _, c := range got.Conditions {
		if want[c.Type] != c.Status {
			t.Errorf("condition %s = %s, want %s", c.Type, c.Status, want[c.Type])
		}
	}
}

// fakeEngine declares pods; every pod that is not declared has stopped
// with final (or has not, when stopped is false).
type fakeEngine struct {
	pods    []*v1.Pod
	final   *v1.Pod
	stopped bool
}

func (f *fakeEngine) Pods() []*v1.Pod { return f.pods }
func (f *fakeEngine) Pod(uid types.UID) *v1.Pod {
	for _, p := range f.pods {
		if p.UID == uid {
			return p.DeepCopy()
		}
	}
	return nil
}
func (f *fakeEngine) Declared(uid types.UID) bool { return f.Pod(uid) != nil }
func (f *fakeEngine) SourcesReady() bool          { return true }
func (f *fakeEngine) PodStopped(types.UID) (*v1.Pod, bool) {
	return f.final, f.stopped
}

// cache reads the fake clientset.
type cache struct{ cs *fake.Clientset }

func (c cache) GetPod(ns, name string) *v1.Pod {
	p, err := c.cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

func (c cache) ListPods() []*v1.Pod {
	l, _ := c.cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	var out []*v1.Pod
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	return out
}

// TestFinalStatusBeforeDelete: a deleted pod's object is left alone while
// something of it runs; once it stopped, its final status (Succeeded, the
// container terminated) is written through the status subresource first,
// and then the object is deleted with grace period 0 and its UID as
// precondition, as kubelet's status manager does.
func TestFinalStatusBeforeDelete(t *testing.T) {
	now := metav1.Now()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1", DeletionTimestamp: &now},
		Status: v1.PodStatus{Phase: v1.PodRunning}}
	cs := fake.NewSimpleClientset(pod)
	eng := &fakeEngine{}
	m := New(Config{Client: cs, Engine: eng, Pods: cache{cs}, NodeName: "node-a", NodeUID: func() types.UID { return "n" }})
	ctx := context.Background()
	m.pass(ctx)
	for _, a := range cs.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			t.Fatalf("%s %s/%s while the pod still runs, want nothing written", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
		}
	}
	cs.ClearActions()
	final := pod.DeepCopy()
	final.Status = v1.PodStatus{Phase: v1.PodSucceeded, ContainerStatuses: []v1.ContainerStatus{{
		Name: "main", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}}
	eng.final, eng.stopped = final, true
	m.pass(ctx)
	var writes []string
	for _, a := range cs.Actions() {
		switch act := a.(type) {
		case k8stesting.UpdateAction:
			p := act.GetObject().(*v1.Pod)
			writes = append(writes, fmt.Sprintf("write %s phase=%s", act.GetSubresource(), p.Status.Phase))
		case k8stesting.PatchAction:
			var p v1.Pod
			if err := json.Unmarshal(act.GetPatch(), &p); err != nil {
				t.Fatal(err)
			}
			writes = append(writes, fmt.Sprintf("write %s phase=%s", act.GetSubresource(), p.Status.Phase))
		case k8stesting.DeleteAction:
			o := act.GetDeleteOptions()
			writes = append(writes, fmt.Sprintf("delete grace=%d uid=%s", *o.GracePeriodSeconds, *o.Preconditions.UID))
		}
	}
	want := []string{"write status phase=Succeeded", "delete grace=0 uid=u1"}
	if fmt.Sprint(writes) != fmt.Sprint(want) {
		t.Errorf("writes %q, want %q", writes, want)
	}
}

// lagging is a pod cache whose watch has not yet seen the deletion: it
// still lists pod.
type lagging struct{ pod *v1.Pod }

func (c lagging) GetPod(ns, name string) *v1.Pod { return c.pod.DeepCopy() }
func (c lagging) ListPods() []*v1.Pod            { return []*v1.Pod{c.pod.DeepCopy()} }

// TestNothingWrittenAfterDelete: once the object is deleted, a sweep or a
// publish that comes before the watch reports it gone writes nothing more
// (before, each such status patch was answered 404).
func TestNothingWrittenAfterDelete(t *testing.T) {
	now := metav1.Now()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1", DeletionTimestamp: &now},
		Status: v1.PodStatus{Phase: v1.PodRunning}}
	cs := fake.NewSimpleClientset(pod)
	final := pod.DeepCopy()
	final.Status = v1.PodStatus{Phase: v1.PodSucceeded}
	eng := &fakeEngine{final: final, stopped: true}
	m := New(Config{Client: cs, Engine: eng, Pods: lagging{pod}, NodeName: "node-a", NodeUID: func() types.UID { return "n" }})
	ctx := context.Background()
	m.pass(ctx)
	var verbs []string
	for _, a := range cs.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	if fmt.Sprint(verbs) != "[patch delete]" {
		t.Fatalf("first pass: %v, want [patch delete]", verbs)
	}
	cs.ClearActions()
	eng.final = final.DeepCopy()
	eng.final.Status.Message = "a later publish"
	m.pass(ctx)
	m.pass(ctx)
	if a := cs.Actions(); len(a) > 0 {
		t.Errorf("after the delete: %d more requests (first: %s %s), want none", len(a), a[0].GetVerb(), a[0].GetSubresource())
	}
}
