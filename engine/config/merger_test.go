package config

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pod builds a static-looking pod; opts tweak it.
func pod(name, uid string, opts ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid),
			Annotations: map[string]string{AnnotationSource: SourceFile, AnnotationHash: uid}},
		Spec:   v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// drain returns the operations waiting on the channel as "OP name,name".
func drain(m *Merger) []string {
	var out []string
	for {
		select {
		case u := <-m.Updates():
			var names []string
			for _, p := range u.Pods {
				names = append(names, p.Name)
			}
			out = append(out, fmt.Sprintf("%s %s", u.Op, strings.Join(names, ",")))
		default:
			return out
		}
	}
}

func TestMerger(t *testing.T) {
	image := func(img string) func(*v1.Pod) { return func(p *v1.Pod) { p.Spec.Containers[0].Image = img } }
	label := func(p *v1.Pod) { p.Labels = map[string]string{"tier": "web"} }
	running := func(p *v1.Pod) { p.Status.Phase = v1.PodRunning }
	deleting := func(p *v1.Pod) {
		at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		p.DeletionTimestamp = &at
	}
	steps := []struct {
		what   string
		source string
		pods   []*v1.Pod
		want   []string
	}{
		{"first empty snapshot says the source is ready", "file", nil, []string{"ADD "}},
		{"same empty snapshot again: nothing", "file", nil, nil},
		{"two pods appear", "file", []*v1.Pod{pod("b", "2"), pod("a", "1")}, []string{"ADD a,b"}},
		{"unchanged: nothing", "file", []*v1.Pod{pod("a", "1"), pod("b", "2")}, nil},
		{"another source's first snapshot", "http", []*v1.Pod{pod("h", "9")}, []string{"ADD h"}},
		{"replace b by c, change a's image", "file", []*v1.Pod{pod("a", "1", image("busybox:2")), pod("c", "3")}, []string{"REMOVE b", "ADD c", "UPDATE a"}},
		{"a label change is an update", "file", []*v1.Pod{pod("a", "1", image("busybox:2"), label), pod("c", "3")}, []string{"UPDATE a"}},
		{"a status change is a reconcile", "file", []*v1.Pod{pod("a", "1", image("busybox:2"), label), pod("c", "3", running)}, []string{"RECONCILE c"}},
		{"a deletion timestamp is a delete", "file", []*v1.Pod{pod("a", "1", image("busybox:2"), label, deleting), pod("c", "3", running)}, []string{"DELETE a"}},
		{"duplicate UID in a snapshot: the first wins", "file", []*v1.Pod{pod("a", "1", image("busybox:2"), label, deleting), pod("c", "3", running), pod("d", "3")}, nil},
		{"everything removed", "file", nil, []string{"REMOVE a,c"}},
		{"the other source is untouched", "http", []*v1.Pod{pod("h", "9")}, nil},
	}
	m := NewMerger(nil)
	for _, s := range steps {
		if err := m.Set(context.Background(), s.source, s.pods); err != nil {
			t.Fatalf("%s: Set: %v", s.what, err)
		}
		got := drain(m)
		if fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Errorf("%s: ops %q, want %q", s.what, got, s.want)
		}
	}
}

func TestMergerAnnotatesAndCopies(t *testing.T) {
	m := NewMerger(nil)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.now = func() time.Time { return at }
	in := pod("a", "1")
	if err := m.Set(context.Background(), "file", []*v1.Pod{in}); err != nil {
		t.Fatal(err)
	}
	u := <-m.Updates()
	got := u.Pods[0]
	if u.Op != OpAdd || u.Source != "file" || got.Annotations[AnnotationSeen] != "2026-01-02T03:04:05Z" {
		t.Fatalf("update %s from %s, seen %q; want ADD from file seen 2026-01-02T03:04:05Z", u.Op, u.Source, got.Annotations[AnnotationSeen])
	}
	if _, ok := in.Annotations[AnnotationSeen]; ok {
		t.Error("Set wrote the caller's pod")
	}
	got.Spec.Containers[0].Image = "changed-by-receiver"
	if p := m.Pods("file")[0]; p.Spec.Containers[0].Image != "busybox" {
		t.Errorf("receiver's change leaked into the merger: image %q", p.Spec.Containers[0].Image)
	}
	// A later update keeps the first-seen time.
	m.now = func() time.Time { return at.Add(time.Hour) }
	if err := m.Set(context.Background(), "file", []*v1.Pod{pod("a", "1", func(p *v1.Pod) { p.Labels = map[string]string{"x": "y"} })}); err != nil {
		t.Fatal(err)
	}
	if u := <-m.Updates(); u.Op != OpUpdate || u.Pods[0].Annotations[AnnotationSeen] != "2026-01-02T03:04:05Z" {
		t.Errorf("update %s seen %q; want UPDATE keeping the first seen time", u.Op, u.Pods[0].Annotations[AnnotationSeen])
	}
}

func TestMergerSetHonoursContext(t *testing.T) {
	m := NewMerger(nil)
	// The pod that was not delivered is sent by the next snapshot.
	setAfterCancel(t, m, pod("a", "1"), "[ADD a]")
	// A snapshot replacing a by b, cancelled before anything is delivered,
	// is sent whole by the next Set.
	setAfterCancel(t, m, pod("b", "2"), "[REMOVE a ADD b]")
}

// setAfterCancel sets the file source to p with m's channel full and a
// cancelled context (Set fails with context.Canceled), then, the channel
// emptied, again: the second Set must deliver the ops want.
func setAfterCancel(t *testing.T, m *Merger, p *v1.Pod, want string) {
	t.Helper()
	for len(m.updates) < cap(m.updates) {
		m.updates <- PodUpdate{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Set(ctx, "file", []*v1.Pod{p}); err != context.Canceled {
		t.Fatalf("Set on a full channel with a cancelled context = %v, want context.Canceled", err)
	}
	for len(m.updates) > 0 {
		<-m.updates
	}
	if err := m.Set(context.Background(), "file", []*v1.Pod{p}); err != nil {
		t.Fatal(err)
	}
	if got := drain(m); fmt.Sprint(got) != want {
		t.Errorf("after a cancelled Set: ops %q, want %s", got, want)
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[Op]string{OpAdd: "ADD", OpUpdate: "UPDATE", OpRemove: "REMOVE", OpDelete: "DELETE", OpReconcile: "RECONCILE", OpRestore: "RESTORE", Op(42): "Op(42)"} {
		if op.String() != want {
			t.Errorf("Op(%d).String() = %q, want %q", int(op), op.String(), want)
		}
	}
	if IsStatic(pod("a", "1", func(p *v1.Pod) { p.Annotations[AnnotationSource] = SourceAPI })) || IsStatic(&v1.Pod{}) {
		t.Error("IsStatic true for an API pod or a pod without a source")
	}
}
