package engine

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine/config"
)

// TestContainerd runs the engine on a real containerd (root only; see
// harness.ForTest): a hostNetwork busybox pod that ignores SIGTERM and a
// job that exits 3 under restartPolicy Never; then removes both and checks
// that the runtime is empty.
func TestContainerd(t *testing.T) {
	c := harness.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rt, err := cri.Dial(ctx, c.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Runtime: rt, RootDir: filepath.Join(t.TempDir(), "root"), NodeName: "node",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	updates := make(chan config.PodUpdate, 4)
	done := make(chan error, 1)
	rctx, stop := context.WithCancel(ctx)
	go func() { done <- e.Run(rctx, updates) }()
	defer func() { stop(); <-done }()

	grace := int64(2)
	mk := func(name string, policy v1.RestartPolicy, script string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"),
				Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
			Spec: v1.PodSpec{HostNetwork: true, RestartPolicy: policy, TerminationGracePeriodSeconds: &grace,
				Containers: []v1.Container{{Name: "main", Image: c.ImageRef("busybox:latest"),
					ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"/bin/sh", "-c", script}}}},
		}
	}
	web := mk("web", v1.RestartPolicyAlways, `trap "" TERM; while true; do sleep 0.2; done`)
	job := mk("job", v1.RestartPolicyNever, `exit 3`)
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{web, job}, Source: config.SourceFile}

	waitFor(t, ctx, "web Running and Ready, job Failed with exit code 3", func() bool {
		var okWeb, okJob bool
		for _, p := range e.Pods() {
			switch p.Name {
			case "web":
				okWeb = p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
			case "job":
				cs := p.Status.ContainerStatuses
				okJob = p.Status.Phase == v1.PodFailed && len(cs) == 1 && cs[0].State.Terminated != nil &&
					cs[0].State.Terminated.ExitCode == 3 && cs[0].State.Terminated.Reason == "Error"
			}
		}
		return okWeb && okJob
	}, e)

	updates <- config.PodUpdate{Op: config.OpRemove, Pods: []*v1.Pod{web, job}, Source: config.SourceFile}
	waitFor(t, ctx, "runtime empty", func() bool {
		sbs, err1 := rt.ListPodSandbox(ctx, nil)
		cs, err2 := rt.ListContainers(ctx, nil)
		return err1 == nil && err2 == nil && len(sbs) == 0 && len(cs) == 0
	}, e)
}

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool, e *Engine) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s; pods:\n%s", what, formatPods(e.Pods()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
