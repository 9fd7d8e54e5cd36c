package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/engine/config"
)

// TestMaxPods250 runs --max-pods 250 on the simulated runtime (real gRPC):
// 250 pods of config.MaxContainers (24) containers with long names (the
// pod name is cut to 120 characters: with the longest namespace and UID the
// log directory <namespace>_<name>_<uid> must stay a valid file name) and
// the longest container names and image references, all
// Running, while the runtime also holds other clients' containers (standing
// in for the dead instance per container the default GC keeps, which would
// take a crash of every container to make): a whole ListContainers reply
// is then about 18 MiB, over the 16 MiB limit. The PLEG relist still
// lists everything, and no list reply the runtime
// answers over gRPC is over cri.MaxMsgSize.
func TestMaxPods250(t *testing.T) {
	if testing.Short() {
		t.Skip("6,000 containers")
	}
	const pods = 250
	srv, err := sim.Start(t.TempDir(), sim.Options{Images: []string{"busybox:latest"}, EventBuffer: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ctx := context.Background()
	pad := strings.Repeat("f", 2<<10)
	for s := range 100 {
		sc := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("other-%d", s), Namespace: "other", Uid: fmt.Sprintf("other-%d", s)}}
		sb, err := srv.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sc})
		if err != nil {
			t.Fatal(err)
		}
		for c := range 40 {
			if _, err := srv.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sc,
				Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("c%d", c)},
					Image: &runtimeapi.ImageSpec{Image: "busybox:latest"}, Annotations: map[string]string{"example.com/pad": pad}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rt, err := cri.Dial(ctx, srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	e, err := New(Config{Runtime: rt, RootDir: t.TempDir(), NodeName: "node", MaxPods: pods,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	updates := make(chan config.PodUpdate, 1)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx, updates) }()
	defer func() { cancel(); <-done }()

	// The longest repository name (255) and tag (128) a reference allows.
	image := "registry.example.com/" + strings.Repeat("i", 255-len("registry.example.com/")) + ":" + strings.Repeat("t", 128)
	g := int64(1)
	var ps []*v1.Pod
	for i := range pods {
		name := fmt.Sprintf("%s-%03d", strings.Repeat("p", 116), i)
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: strings.Repeat("n", 63), UID: types.UID(fmt.Sprintf("%s-%03d", strings.Repeat("u", 59), i)),
			Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
			Spec: v1.PodSpec{HostNetwork: true, TerminationGracePeriodSeconds: &g, RestartPolicy: v1.RestartPolicyAlways}}
		for c := range config.MaxContainers {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprintf("%s-%02d", strings.Repeat("c", 60), c), Image: image, ImagePullPolicy: v1.PullIfNotPresent})
		}
		ps = append(ps, p)
	}
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: ps, Source: config.SourceFile}
	deadline := time.Now().Add(5 * time.Minute)
	for e.countRunning() < pods {
		if time.Now().After(deadline) {
			e.mu.RLock()
			for _, w := range e.workers {
				if p := w.Snapshot(); p != nil && p.Status.Phase != v1.PodRunning {
					t.Logf("pod %s: %s %s %+v", p.Name[len(p.Name)-3:], p.Status.Phase, p.Status.Message, p.Status.ContainerStatuses[0].State)
					break
				}
			}
			e.mu.RUnlock()
			t.Fatalf("%d of %d pods Running after 5 min; healthz: %v", e.countRunning(), pods, e.Healthz())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The first relist over the limit may make one whole call the runtime
	// refuses to send (ResourceExhausted) before it splits; from then on
	// no reply is over the limit.
	if _, err := e.pleg.Relist(ctx); err != nil {
		t.Fatalf("relist of 250 pods: %v", err)
	}
	srv.Runtime.ResetLargestReplies()
	if _, err := e.pleg.Relist(ctx); err != nil {
		t.Fatalf("relist of 250 pods: %v", err)
	}
	cs, err := rt.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cs); n != pods*config.MaxContainers+100*40 {
		t.Errorf("ListContainers: %d containers, want %d", n, pods*config.MaxContainers+100*40)
	}
	for _, m := range []string{"ListContainers", "ListPodSandbox"} {
		if n := srv.Runtime.LargestReply(m); n == 0 || n > cri.MaxMsgSize {
			t.Errorf("largest %s reply: %d bytes, want 1..%d", m, n, cri.MaxMsgSize)
		}
	}
	if err := e.Healthz(); err != nil {
		t.Errorf("healthz with 250 pods: %v", err)
	}
}
