package kubeletapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/kubeletapi"
)

// The label sets of TestKubeletLabels: the agent's own and kubelet's.
var (
	ownLabels     = kubeletapi.Labels{PodUID: "own/uid", PodName: "own/name", PodNamespace: "own/ns", ContainerName: "own/container"}
	kubeletLabels = kubeletapi.Labels{PodUID: "io.kubernetes.pod.uid", PodName: "io.kubernetes.pod.name",
		PodNamespace: "io.kubernetes.pod.namespace", ContainerName: "io.kubernetes.container.name"}
)

func labelsOf(l kubeletapi.Labels, uid, name, ns, container string) map[string]string {
	m := map[string]string{l.PodUID: uid, l.PodName: name, l.PodNamespace: ns}
	if container != "" {
		m[l.ContainerName] = container
	}
	return m
}

// labelRuntime holds the sandboxes and containers given and answers the
// lists as containerd does (label selectors, states); the streaming calls
// record the ID they were asked for and fail.
type labelRuntime struct {
	kubeletapi.Runtime // the calls the test does not make
	sbs                []*runtimeapi.PodSandbox
	cs                 []*runtimeapi.Container
	logPath            string
	asked              []string // container or sandbox IDs of Exec, Attach, PortForward, ExecSync
}

func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (r *labelRuntime) ListContainers(_ context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	var out []*runtimeapi.Container
	for _, c := range r.cs {
		if matches(f.GetLabelSelector(), c.Labels) && (f.GetState() == nil || f.GetState().State == c.State) {
			out = append(out, c)
		}
	}
	return out, nil
}

func (r *labelRuntime) ListPodSandbox(_ context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	var out []*runtimeapi.PodSandbox
	for _, s := range r.sbs {
		if matches(f.GetLabelSelector(), s.Labels) && (f.GetState() == nil || f.GetState().State == s.State) {
			out = append(out, s)
		}
	}
	return out, nil
}

func (r *labelRuntime) ContainerStatus(_ context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	for _, c := range r.cs {
		if c.Id == id {
			return &runtimeapi.ContainerStatus{Id: id, State: c.State, LogPath: r.logPath}, nil
		}
	}
	return nil, errors.New("no such container")
}

var errStreaming = errors.New("no streaming in this test")

func (r *labelRuntime) ExecSync(_ context.Context, id string, cmd []string, _ time.Duration) (cri.ExecResult, error) {
	r.asked = append(r.asked, id)
	return cri.ExecResult{Stdout: []byte("ran in " + id)}, nil
}
func (r *labelRuntime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (string, error) {
	r.asked = append(r.asked, req.ContainerId)
	return "", errStreaming
}
func (r *labelRuntime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (string, error) {
	r.asked = append(r.asked, req.ContainerId)
	return "", errStreaming
}
func (r *labelRuntime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (string, error) {
	r.asked = append(r.asked, req.PodSandboxId)
	return "", errStreaming
}

// labelHost has the pods of TestKubeletLabels: default/adopted (kubelet
// made its objects) and default/own (the agent's, with both label sets).
type labelHost struct{}

func (labelHost) Pods() []*v1.Pod {
	return []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "adopted", Namespace: "default", UID: "uid-k"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: "default", UID: "uid-s"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main"}}}},
	}
}
func (labelHost) Healthz() error { return nil }

// TestKubeletLabels: with Fallback set to kubelet's labels, a pod whose
// sandbox and container carry only kubelet's labels is reached by logs,
// /run, exec, attach and port-forward, and listed by /runningpods; an
// object with both sets counts once. Without Fallback the same requests
// find no container.
func TestKubeletLabels(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(logPath, []byte("2026-01-02T03:04:05.000000000Z stdout F hello from the log\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	running, ready := runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.PodSandboxState_SANDBOX_READY
	both := func(uid, name, container string) map[string]string {
		m := labelsOf(ownLabels, uid, name, "default", container)
		for k, v := range labelsOf(kubeletLabels, uid, name, "default", container) {
			m[k] = v
		}
		return m
	}
	newRuntime := func() *labelRuntime {
		return &labelRuntime{logPath: logPath,
			sbs: []*runtimeapi.PodSandbox{
				{Id: "sb-k", State: ready, CreatedAt: 1, Labels: labelsOf(kubeletLabels, "uid-k", "adopted", "default", "")},
				{Id: "sb-s", State: ready, CreatedAt: 2, Labels: both("uid-s", "own", "")},
			},
			cs: []*runtimeapi.Container{
				{Id: "c-k", PodSandboxId: "sb-k", State: running, CreatedAt: 1, Labels: labelsOf(kubeletLabels, "uid-k", "adopted", "default", "main")},
				{Id: "c-s", PodSandboxId: "sb-s", State: running, CreatedAt: 2, Labels: both("uid-s", "own", "main")},
			}}
	}
	serve := func(fallback kubeletapi.Labels) (*labelRuntime, func(method, path string) (int, string)) {
		rt := newRuntime()
		api, err := kubeletapi.New(kubeletapi.Config{Host: labelHost{}, Runtime: rt, NodeName: "node-a", Anonymous: true,
			Authorizer: kubeletapi.AlwaysAllow{}, Labels: ownLabels, Fallback: fallback, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return rt, func(method, path string) (int, string) {
			w := httptest.NewRecorder()
			api.ServeHTTP(w, httptest.NewRequest(method, path, nil))
			b, _ := io.ReadAll(w.Result().Body)
			return w.Code, string(b)
		}
	}

	rt, do := serve(kubeletLabels)
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
		asked        string
	}{
		{"GET", "/containerLogs/default/adopted/main", 200, "hello from the log", ""},
		{"POST", "/run/default/adopted/main?cmd=true", 200, "ran in c-k", "c-k"},
		{"POST", "/exec/default/adopted/main?command=true&stdout=1", 500, errStreaming.Error(), "c-k"},
		{"POST", "/attach/default/adopted/main?stdout=1", 500, errStreaming.Error(), "c-k"},
		{"POST", "/portForward/default/adopted?port=80", 500, errStreaming.Error(), "sb-k"},
		{"POST", "/run/default/own/main?cmd=true", 200, "ran in c-s", "c-s"},
		{"POST", "/portForward/default/own?port=80", 500, errStreaming.Error(), "sb-s"},
		// one instance, though both label sets find it
		{"GET", "/containerLogs/default/own/main?previous=true", 400, "no previous container \"main\" in pod default/own (1 in the runtime)", ""},
		{"GET", "/runningpods/", 200, `"name":"adopted","namespace":"default","uid":"uid-k"`, ""},
	} {
		rt.asked = nil
		code, body := do(tc.method, tc.path)
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("%s %s: %d %q, want %d with %q", tc.method, tc.path, code, body, tc.code, tc.body)
		}
		if got := strings.Join(rt.asked, ","); got != tc.asked {
			t.Errorf("%s %s: the runtime was asked for %q, want %q", tc.method, tc.path, got, tc.asked)
		}
	}
	if _, body := do("GET", "/runningpods/"); strings.Count(body, `"name":"main"`) != 2 {
		t.Errorf("/runningpods/: %s, want each pod's container main once", body)
	}

	// Without Fallback, kubelet's objects are not found.
	rt, do = serve(kubeletapi.Labels{})
	for _, path := range []string{"/containerLogs/default/adopted/main", "/run/default/adopted/main?cmd=true", "/portForward/default/adopted?port=80"} {
		method := "POST"
		if strings.HasPrefix(path, "/containerLogs") {
			method = "GET"
		}
		if code, body := do(method, path); code != http.StatusBadRequest || len(rt.asked) > 0 {
			t.Errorf("without Fallback, %s: %d %q, asked %v; want 400 and no runtime call", path, code, body, rt.asked)
		}
	}
}

// TestKubeletLabelsStats: /stats/summary lists a pod whose sandbox and
// container carry only the Fallback labels, under its name, namespace and
// container name; without Fallback it lists none.
func TestKubeletLabelsStats(t *testing.T) {
	for _, fallback := range []kubeletapi.Labels{statsLabels, {}} {
		api, err := kubeletapi.New(kubeletapi.Config{Host: noPods{}, Runtime: fakeStatsRuntime{fsDir: t.TempDir()}, NodeName: "n",
			Labels: ownLabels, Fallback: fallback, Authorizer: kubeletapi.AlwaysAllow{}, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(api.ReadOnlyHandler())
		_, body := get(t, srv.Client(), srv.URL+"/stats/summary")
		srv.Close()
		var s statsapi.Summary
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatal(err)
		}
		switch {
		case fallback.PodUID != "" && (len(s.Pods) != 1 || s.Pods[0].PodRef != statsapi.PodReference{Name: "web", Namespace: "shop", UID: "u1"} ||
			len(s.Pods[0].Containers) != 1 || s.Pods[0].Containers[0].Name != "main"):
			t.Errorf("with Fallback: summary pods %+v, want shop/web (u1) with container main", s.Pods)
		case fallback.PodUID == "" && len(s.Pods) != 0:
			t.Errorf("without Fallback: summary pods %+v, want none", s.Pods)
		}
	}
}
