package engine

import (
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/config"
)

// waitFor checks cond after each settle, stepping the fake clock by step
// before the next, at most 600 times; it reports whether cond held.
func (h *scriptHarness) waitFor(step time.Duration, cond func() bool) bool {
	h.settle()
	for range 600 {
		if cond() {
			return true
		}
		if step > 0 {
			h.clk.Step(step)
		}
		h.settle()
	}
	return cond()
}

// While the engine cannot rebuild its state from the runtime (here
// ListPodSandbox fails as it does when the sandbox list exceeds the gRPC
// message limit), /healthz fails and names the reason, and
// speclet_engine_recovered is 0; both turn healthy once recovery works.
func TestHealthzUntilRecovered(t *testing.T) { synctest.Test(t, testHealthzUntilRecovered) }

func testHealthzUntilRecovered(t *testing.T) {
	h := newHarness(t)
	h.srv.Runtime.FailCall("ListPodSandbox", 3, codes.ResourceExhausted, "trying to send message larger than max (20000000 vs. 16777216)")
	h.launch(Config{})
	if err := h.eng.Healthz(); err == nil || !strings.Contains(err.Error(), "not ready: rebuilding state from the runtime") {
		t.Fatalf("Healthz before recovery = %v, want not ready", err)
	}
	if !h.waitFor(0, func() bool {
		err := h.eng.Healthz()
		return err != nil && strings.Contains(err.Error(), "larger than max")
	}) {
		t.Fatalf("Healthz while recovery fails = %v, want the ListPodSandbox error", h.eng.Healthz())
	}
	if v := gaugeOf(t, h, "speclet_engine_recovered"); v != 0 {
		t.Errorf("speclet_engine_recovered = %v while recovery fails, want 0", v)
	}
	if !h.waitFor(time.Second, func() bool { return h.eng.Healthz() == nil }) {
		t.Fatalf("Healthz after the runtime answers = %v, want ok", h.eng.Healthz())
	}
	if v := gaugeOf(t, h, "speclet_engine_recovered"); v != 1 {
		t.Errorf("speclet_engine_recovered = %v after recovery, want 1", v)
	}
	if v := gaugeOf(t, h, "speclet_engine_healthy"); v != 1 {
		t.Errorf("speclet_engine_healthy = %v after recovery, want 1", v)
	}
}

// gaugeOf returns the value of the engine's gauge name.
func gaugeOf(t *testing.T, h *scriptHarness, name string) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// A pod declared while MaxPods admitted pods are active is refused
// admission as kubelet refuses it (Failed, OutOfpods, with kubelet's
// message); the pods already declared run, and once one is removed a new
// pod is admitted again (a refused pod counts for nothing).
func TestMaxPods(t *testing.T) { synctest.Test(t, testMaxPods) }

func testMaxPods(t *testing.T) {
	h := newHarness(t)
	h.start(Config{MaxPods: 2})
	pod := func(name string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
			Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "main", Image: "busybox:latest", ImagePullPolicy: v1.PullIfNotPresent}}}}
	}
	h.send(config.PodUpdate{Op: config.OpAdd, Source: config.SourceFile, Pods: []*v1.Pod{pod("a"), pod("b"), pod("c")}})
	h.settle()
	var names []string
	for _, p := range h.eng.Pods() {
		names = append(names, p.Name+"="+string(p.Status.Phase))
		if p.Name == "c" {
			const msg = "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
			if p.Status.Reason != "OutOfpods" || p.Status.Message != msg {
				t.Errorf("pod c: reason %q message %q, want OutOfpods, %q", p.Status.Reason, p.Status.Message, msg)
			}
		}
	}
	sort.Strings(names)
	if got := strings.Join(names, ","); got != "a=Running,b=Running,c=Failed" {
		t.Errorf("pods %s, want a and b Running and c refused (Failed)", got)
	}
	if n := h.srv.Runtime.Calls("RunPodSandbox"); n != 2 {
		t.Errorf("RunPodSandbox called %d times, want 2 (none for the refused pod)", n)
	}
	h.send(config.PodUpdate{Op: config.OpRemove, Source: config.SourceFile, Pods: []*v1.Pod{pod("a")}})
	h.send(config.PodUpdate{Op: config.OpAdd, Source: config.SourceFile, Pods: []*v1.Pod{pod("d")}})
	h.settle()
	names = nil
	for _, p := range h.eng.Pods() {
		names = append(names, p.Name+"="+string(p.Status.Phase))
	}
	sort.Strings(names)
	if got := strings.Join(names, ","); got != "b=Running,c=Failed,d=Running" {
		t.Errorf("after removing a and adding d: pods %s, want b and d Running, c still refused", got)
	}
}
