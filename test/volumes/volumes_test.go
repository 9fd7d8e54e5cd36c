package volumes

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/volume"
	"github.com/speclet/speclet/test/cluster"
)

const node = "node-a"

type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// boundPod creates pod in the API server bound to the node (the API
// server's ServiceAccount admission adds the kube-api-access projected
// volume, as in any cluster) and returns it as stored, with its UID.
func boundPod(t *testing.T, ctx context.Context, admin kubernetes.Interface, pod *v1.Pod) *v1.Pod {
	t.Helper()
	pod.Spec.NodeName = node
	got, err := admin.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	got.Annotations = map[string]string{config.AnnotationSource: config.SourceFile}
	return got
}

func podStatus(e *engine.Engine, name string) *v1.PodStatus {
	for _, p := range e.Pods() {
		if p.Name == name {
			return &p.Status
		}
	}
	return nil
}

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestAPIVolumes runs pods bound to node-a, with node-a's credentials
// reading their volumes from a real kube-apiserver, on a real containerd:
//   - a configMap volume's file follows an update of the configMap (the
//     ..data swap, within the sync period);
//   - a pod whose configMap does not exist stays ContainerCreating with a
//     FailedMount naming the volume, and runs once the configMap is created;
//   - the service account token of the kube-api-access projected volume
//     (TokenRequest, bound to the pod) is accepted by the API server's
//     TokenReview, for the pod's service account and bound to the pod.
func TestAPIVolumes(t *testing.T) {
	cl := cluster.ForTest(t, cluster.Options{})
	c := harness.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin, err := cl.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := cl.NodeKubeconfig(node)
	if err != nil {
		t.Fatal(err)
	}
	nodeClient, err := cluster.Clientset(kc)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := cri.Dial(ctx, c.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncWriter
	e, err := engine.New(engine.Config{Runtime: rt, RootDir: filepath.Join(t.TempDir(), "root"), NodeName: node,
		SyncFrequency: 3 * time.Second, VolumeAPI: volume.Clientset(nodeClient),
		Log: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, io.Discard), nil))})
	if err != nil {
		t.Fatal(err)
	}
	updates := make(chan config.PodUpdate, 4)
	done := make(chan error, 1)
	rctx, stop := context.WithCancel(ctx)
	go func() { done <- e.Run(rctx, updates) }()
	defer func() { stop(); <-done }()

	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"level": "info"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	typ := v1.HostPathDirectory
	grace := int64(1)
	mk := func(name, cm, script string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: v1.PodSpec{HostNetwork: true, TerminationGracePeriodSeconds: &grace,
				Volumes: []v1.Volume{
					{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: cm}}}},
					{Name: "out", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: out, Type: &typ}}},
				},
				Containers: []v1.Container{{Name: "main", Image: c.ImageRef("busybox:latest"), ImagePullPolicy: v1.PullIfNotPresent,
					Command:      []string{"/bin/sh", "-c", script},
					VolumeMounts: []v1.VolumeMount{{Name: "conf", MountPath: "/conf"}, {Name: "out", MountPath: "/out"}}}}}}
	}
	reader := boundPod(t, ctx, admin, mk("reader", "settings",
		`cp /var/run/secrets/kubernetes.io/serviceaccount/token /out/token; while true; do cat /conf/level > /out/level.tmp; mv /out/level.tmp /out/level; sleep 0.3; done`))
	waiter := boundPod(t, ctx, admin, mk("waiter", "later", `cat /conf/ready > /out/waiter; sleep 3600`))
	if len(reader.Spec.Volumes) != 3 || reader.Spec.Volumes[2].Projected == nil {
		t.Fatalf("the API server added no kube-api-access projected volume: %+v", reader.Spec.Volumes)
	}
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{reader, waiter}, Source: config.SourceFile}

	level := func() string {
		b, _ := os.ReadFile(filepath.Join(out, "level"))
		return string(b)
	}
	waitFor(t, ctx, "reader Running and reading level=info", func() bool {
		st := podStatus(e, "reader")
		return st != nil && st.Phase == v1.PodRunning && level() == "info"
	})

	// The waiter's configMap does not exist: ContainerCreating, FailedMount.
	st := podStatus(e, "waiter")
	if st == nil || st.Phase != v1.PodPending || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Waiting == nil ||
		st.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
		t.Fatalf("waiter status %+v, want Pending with ContainerCreating", st)
	}
	if want := `reason=FailedMount pod=default/waiter volume=conf type=configMap err="configmap \"later\" not found"`; !strings.Contains(logs.String(), want) {
		t.Fatalf("no FailedMount line %s in the log:\n%s", want, logs.String())
	}

	// An update reaches the mounted file.
	cm, err := admin.CoreV1().ConfigMaps("default").Get(ctx, "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["level"] = "debug"
	if _, err := admin.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the configMap update to reach the mounted file", func() bool { return level() == "debug" })

	// The missing configMap appears: the waiter starts.
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"},
		Data: map[string]string{"ready": "yes"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "waiter Running with its configMap", func() bool {
		st := podStatus(e, "waiter")
		b, _ := os.ReadFile(filepath.Join(out, "waiter"))
		return st != nil && st.Phase == v1.PodRunning && string(b) == "yes"
	})

	// The projected token is accepted by the API server.
	tok, err := os.ReadFile(filepath.Join(out, "token"))
	if err != nil || len(tok) == 0 {
		t.Fatalf("the container read no token: %v", err)
	}
	review, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: string(tok)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated || review.Status.User.Username != "system:serviceaccount:default:default" {
		t.Fatalf("TokenReview: %+v", review.Status)
	}
	if got := review.Status.User.Extra["authentication.kubernetes.io/pod-uid"]; len(got) != 1 || got[0] != string(reader.UID) {
		t.Errorf("token bound to pod uid %v, want %s", got, reader.UID)
	}

	updates <- config.PodUpdate{Op: config.OpRemove, Pods: []*v1.Pod{reader, waiter}, Source: config.SourceFile}
	waitFor(t, ctx, "runtime empty", func() bool {
		sbs, err1 := rt.ListPodSandbox(ctx, nil)
		return err1 == nil && len(sbs) == 0
	})
}
