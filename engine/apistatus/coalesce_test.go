package apistatus

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/speclet/speclet/engine/internal/logbuf"
)

// liveEngine declares pods whose status the test publishes.
type liveEngine struct {
	mu   sync.Mutex
	pods map[types.UID]*v1.Pod
}

func (e *liveEngine) set(p *v1.Pod) {
	e.mu.Lock()
	e.pods[p.UID] = p.DeepCopy()
	e.mu.Unlock()
}
func (e *liveEngine) Pods() []*v1.Pod {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*v1.Pod
	for _, p := range e.pods {
		out = append(out, p.DeepCopy())
	}
	return out
}
func (e *liveEngine) Pod(uid types.UID) *v1.Pod {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.pods[uid]; p != nil {
		return p.DeepCopy()
	}
	return nil
}
func (e *liveEngine) Declared(uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pods[uid] != nil
}
func (e *liveEngine) PodStopped(types.UID) (*v1.Pod, bool) { return nil, false }
func (e *liveEngine) SourcesReady() bool                   { return true }

func apiPod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Status: v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}}}
}

func withStatus(p *v1.Pod, phase v1.PodPhase, waiting string) *v1.Pod {
	p = p.DeepCopy()
	p.Status = v1.PodStatus{Phase: phase, HostIP: "10.0.0.1", Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}}
	cs := v1.ContainerStatus{Name: "main", Image: "busybox"}
	if waiting != "" {
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: waiting}
	} else {
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.Now()}
		cs.Ready = true
		p.Status.Conditions[0].Status = v1.ConditionTrue
	}
	p.Status.ContainerStatuses = []v1.ContainerStatus{cs}
	return p
}

// statusPatches are the writes of pods/status in cs's actions; it fails
// the test on a full-object write.
func statusPatches(t *testing.T, cs *fake.Clientset) []k8stesting.PatchAction {
	t.Helper()
	var out []k8stesting.PatchAction
	for _, a := range cs.Actions() {
		switch act := a.(type) {
		case k8stesting.UpdateAction:
			t.Fatalf("a full-object %s of %s/%s, want a patch", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
		case k8stesting.PatchAction:
			if act.GetSubresource() == "status" {
				out = append(out, act)
			}
		}
	}
	return out
}

// waitFor polls cond (a wait, not a timed assertion: the deadline only
// bounds a failing test).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %s", what)
		}
	}
}

// TestCoalescedStatusPatch: a pod published Pending, then
// ContainerCreating, then Running before its first write is written once,
// as a strategic merge patch of pods/status with its UID as precondition,
// carrying the Running status and keeping the scheduler's condition; the
// same status published again writes nothing.
func TestCoalescedStatusPatch(t *testing.T) {
	pod := apiPod()
	cs := fake.NewSimpleClientset(pod)
	m, eng := liveManager(cs, Config{PendingHold: time.Hour, Resync: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	listed := withStatus(pod, v1.PodPending, "ContainerCreating")
	listed.Status.ContainerStatuses = nil
	for _, p := range []*v1.Pod{listed, withStatus(pod, v1.PodPending, "ContainerCreating"), withStatus(pod, v1.PodRunning, "")} {
		eng.set(p)
		m.Published(p)
	}
	waitFor(t, "a status write", func() bool { return len(statusPatches(t, cs)) > 0 })
	patches := statusPatches(t, cs)
	if len(patches) != 1 {
		t.Fatalf("%d status writes, want 1", len(patches))
	}
	if pt := patches[0].GetPatchType(); pt != types.StrategicMergePatchType {
		t.Errorf("patch type %s, want %s", pt, types.StrategicMergePatchType)
	}
	var body v1.Pod
	if err := json.Unmarshal(patches[0].GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	if body.UID != "u1" || body.Status.Phase != v1.PodRunning {
		t.Errorf("patch %s: want uid u1 and phase Running", patches[0].GetPatch())
	}
	got, _ := cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	conds := map[v1.PodConditionType]v1.ConditionStatus{}
	for _, c := range got.Status.Conditions {
		conds[c.Type] = c.Status
	}
	if got.Status.Phase != v1.PodRunning || conds[v1.PodScheduled] != v1.ConditionTrue || conds[v1.PodReady] != v1.ConditionTrue {
		t.Errorf("API status phase %s conditions %v, want Running, PodScheduled and Ready True", got.Status.Phase, conds)
	}
	// The same status again (a new object, new timestamps at the same
	// second or not): nothing to write once the sweep has seen it.
	cs.ClearActions()
	again := withStatus(pod, v1.PodRunning, "")
	again.Status.ContainerStatuses[0].State.Running.StartedAt = got.Status.ContainerStatuses[0].State.Running.StartedAt
	eng.set(again)
	m.Published(again)
	m.pass(ctx)
	if n := len(statusPatches(t, cs)); n != 0 {
		t.Errorf("%d writes of an unchanged status, want 0", n)
	}
}

// TestFailedWritesRetryNewest: while the API server fails every status
// write (500s), the pod's status changes twice;
// once writes succeed again the API has the newest status, and the run of
// failures was logged once.
func TestFailedWritesRetryNewest(t *testing.T) {
	pod := apiPod()
	cs := fake.NewSimpleClientset(pod)
	var mu sync.Mutex
	failing, failures := true, 0
	cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if !failing {
			return false, nil, nil
		}
		failures++
		return true, nil, apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
	})
	var logs logbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m, eng := liveManager(cs, Config{PendingHold: -1, Resync: time.Hour, Log: log})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	p := withStatus(pod, v1.PodPending, "ContainerCreating")
	eng.set(p)
	m.Published(p)
	waitFor(t, "3 failed writes", func() bool { mu.Lock(); defer mu.Unlock(); return failures >= 3 })
	newest := withStatus(pod, v1.PodRunning, "")
	eng.set(newest) // published while the pod is backing off: the next retry reads it
	m.Published(newest)
	mu.Lock()
	failing = false
	mu.Unlock()
	waitFor(t, "the newest status in the API", func() bool {
		got, err := cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.Phase == v1.PodRunning
	})
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d error lines for one run of failures, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "succeeds again") {
		t.Errorf("no line says writes succeed again:\n%s", logs.String())
	}
}

// TestHeldStatuses: a status that only says the pod is being created, or
// that a probe-less container is not ready yet, is held; an error, a
// ready pod or a container waiting on its readiness probe is not.
func TestHeldStatuses(t *testing.T) {
	pod := apiPod()
	errImage := withStatus(pod, v1.PodPending, "ErrImagePull")
	notReady := withStatus(pod, v1.PodRunning, "")
	notReady.Status.ContainerStatuses[0].Ready = false
	probed := notReady.DeepCopy()
	probed.Spec.Containers = []v1.Container{{Name: "main", ReadinessProbe: &v1.Probe{}}}
	for _, tt := range []struct {
		name           string
		p              *v1.Pod
		creating, soon bool
	}{
		{"ContainerCreating", withStatus(pod, v1.PodPending, "ContainerCreating"), true, false},
		{"ErrImagePull", errImage, false, false},
		{"Running and ready", withStatus(pod, v1.PodRunning, ""), false, false},
		{"Running, not ready, no probe", notReady, false, true},
		{"Running, not ready, a readiness probe", probed, false, false},
	} {
		if c, s := creating(tt.p), readySoon(tt.p); c != tt.creating || s != tt.soon {
			t.Errorf("%s: creating %v readySoon %v, want %v %v", tt.name, c, s, tt.creating, tt.soon)
		}
	}
}

// TestProgressWhileCreating: once a being-created status was written, a
// sweep does not write one whose only news is in conditions or addresses
// (the sandbox ready, the pod IP); it writes one in which a container's
// state changed (an init container finished), and Running is written.
func TestProgressWhileCreating(t *testing.T) {
	pod := apiPod()
	cs := fake.NewSimpleClientset(pod)
	m, eng := liveManager(cs, Config{PendingHold: time.Millisecond, Resync: time.Hour})
	ctx := context.Background()
	creatingPod := withStatus(pod, v1.PodPending, "ContainerCreating")
	creatingPod.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "init", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
	eng.set(creatingPod)
	m.pass(ctx)
	if n := len(statusPatches(t, cs)); n != 1 {
		t.Fatalf("%d status writes of the being-created pod, want 1", n)
	}

	sandboxReady := creatingPod.DeepCopy()
	sandboxReady.Status.PodIP = "10.88.0.7"
	sandboxReady.Status.Conditions = append(sandboxReady.Status.Conditions, v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue})
	eng.set(sandboxReady)
	m.pass(ctx)
	if n := len(statusPatches(t, cs)); n != 1 {
		t.Errorf("%d status writes after the sandbox got ready, want still 1", n)
	}

	initDone := sandboxReady.DeepCopy()
	initDone.Status.InitContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	eng.set(initDone)
	m.pass(ctx)
	if n := len(statusPatches(t, cs)); n != 2 {
		t.Errorf("%d status writes after the init container finished, want 2", n)
	}

	eng.set(withStatus(pod, v1.PodRunning, ""))
	m.pass(ctx)
	patches := statusPatches(t, cs)
	if len(patches) != 3 {
		t.Fatalf("%d status writes after Running, want 3", len(patches))
	}
	var last v1.Pod
	if err := json.Unmarshal(patches[2].GetPatch(), &last); err != nil {
		t.Fatal(err)
	}
	if last.Status.Phase != v1.PodRunning {
		t.Errorf("last write: phase %q, want Running", last.Status.Phase)
	}
}

// liveManager returns a manager of node-a that writes to cs what a
// liveEngine publishes (the engine is returned too), with the hold, resync
// and log of cfg.
func liveManager(cs *fake.Clientset, cfg Config) (*Manager, *liveEngine) {
	eng := &liveEngine{pods: map[types.UID]*v1.Pod{}}
	cfg.Client, cfg.Engine, cfg.Pods, cfg.NodeName = cs, eng, cache{cs}, "node-a"
	cfg.NodeUID = func() types.UID { return "n" }
	return New(cfg), eng
}
