package volumes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/cluster"
)

const node = "node-a"

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool, diag func() string) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s\n%s", what, diag())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func getPod(ctx context.Context, cs kubernetes.Interface, name string) *v1.Pod {
	p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

func waiting(p *v1.Pod) string {
	if p == nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Waiting == nil {
		return ""
	}
	return p.Status.ContainerStatuses[0].State.Waiting.Reason
}

// TestAPIVolumes runs speclet as node-a of a real kube-apiserver (Node
// authorizer, NodeRestriction) on a real containerd, with pods created in
// the API and bound to the node; their containers copy what they see into
// a hostPath directory:
//   - the service account token of the kube-api-access projected volume
//     (added by the API server's ServiceAccount admission; TokenRequest
//     bound to the pod) is accepted by TokenReview for the pod's service
//     account and bound to the pod's UID;
//   - a configMap volume's file follows an update of the configMap (the
//     ..data swap, within --sync-frequency);
//   - a pod whose configMap does not exist stays ContainerCreating in the
//     API and gets a FailedMount event (and log line) naming the volume and
//     the cause (once the Node authorizer lets the node read it: until then
//     the cause is "forbidden"), and runs once the configMap is created;
//   - a secret volume (items, defaultMode) is a tmpfs with the secret's
//     data.
func TestAPIVolumes(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: this test runs containerd and needs root")
		}
		t.Skip("this test runs containerd and needs root")
	}
	cl := cluster.ForTest(t, cluster.Options{})
	c := harness.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin, err := cl.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := cluster.BuildSpeclet(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Torn down before the test's directories go: the node stops, c
	// removes its pods, the volumes speclet left mounted are unmounted.
	n := cl.NodeForTest(ctx, t, cluster.NodeOptions{Name: node, Bin: bin, Containerd: c, Dir: t.TempDir(), Args: []string{"--sync-frequency", "3s"}})
	diag := func() string { return "node log:\n" + n.LogTail(40) }

	for name, data := range map[string]map[string]string{"settings": {"level": "info"}} {
		if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"password": []byte("s3cret"), "unused": []byte("x")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	typ := v1.HostPathDirectory
	grace := int64(1)
	mk := func(name, cm, script string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: v1.PodSpec{NodeName: node, HostNetwork: true, TerminationGracePeriodSeconds: &grace,
				Volumes: []v1.Volume{
					{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: cm}}}},
					{Name: "out", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: out, Type: &typ}}},
				},
				Containers: []v1.Container{{Name: "main", Image: c.ImageRef(harness.BusyboxRepo), ImagePullPolicy: v1.PullIfNotPresent,
					Command:      []string{"/bin/sh", "-c", script},
					VolumeMounts: []v1.VolumeMount{{Name: "conf", MountPath: "/conf"}, {Name: "out", MountPath: "/out"}}}}}}
	}
	mode := int32(0o400)
	reader := mk("reader", "settings", strings.Join([]string{
		`cp /var/run/secrets/kubernetes.io/serviceaccount/token /out/token`,
		`cat /sec/pw > /out/secret; stat -L -c %a /sec/pw > /out/secret-mode; grep " /sec " /proc/mounts > /out/secret-mount`,
		`while true; do cat /conf/level > /out/level.tmp; mv /out/level.tmp /out/level; sleep 0.3; done`,
	}, "\n"))
	reader.Spec.Volumes = append(reader.Spec.Volumes, v1.Volume{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{
		SecretName: "creds", DefaultMode: &mode, Items: []v1.KeyToPath{{Key: "password", Path: "pw"}}}}})
	reader.Spec.Containers[0].VolumeMounts = append(reader.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: "sec", MountPath: "/sec"})
	created, err := admin.CoreV1().Pods("default").Create(ctx, reader, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, mk("waiter", "later", `cat /conf/ready > /out/waiter; sleep 3600`), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	projected := false
	for _, v := range created.Spec.Volumes {
		projected = projected || v.Projected != nil && strings.HasPrefix(v.Name, "kube-api-access-")
	}
	if !projected {
		t.Fatalf("the API server added no kube-api-access projected volume: %+v", created.Spec.Volumes)
	}

	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(out, name))
		return strings.TrimSpace(string(b))
	}
	waitFor(t, ctx, "reader Running in the API and reading level=info", func() bool {
		p := getPod(ctx, admin, "reader")
		return p != nil && p.Status.Phase == v1.PodRunning && read("level") == "info"
	}, diag)

	// The projected token is accepted by the API server, bound to the pod.
	review, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: read("token")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated || review.Status.User.Username != "system:serviceaccount:default:default" {
		t.Fatalf("TokenReview of the mounted token: %+v", review.Status)
	}
	if got := review.Status.User.Extra["authentication.kubernetes.io/pod-uid"]; len(got) != 1 || got[0] != string(created.UID) {
		t.Errorf("token bound to pod uid %v, want %s", got, created.UID)
	}

	// The secret: its item only, with defaultMode, on a tmpfs.
	if got := read("secret"); got != "s3cret" {
		t.Errorf("secret file = %q", got)
	}
	if got := read("secret-mode"); got != "400" {
		t.Errorf("secret file mode = %q, want 400", got)
	}
	if got := read("secret-mount"); !strings.HasPrefix(got, "tmpfs /sec tmpfs ro,") {
		t.Errorf("/sec in the container's /proc/mounts: %q, want a read-only tmpfs", got)
	}

	// The waiter's configMap does not exist: ContainerCreating, then (in
	// the log and as an event) FailedMount naming it not found.
	// The status manager holds a being-created status up to 5 s after the
	// pod's first publish (engine/apistatus), so it may not be there yet.
	waitFor(t, ctx, "waiter Pending with ContainerCreating in the API", func() bool {
		p := getPod(ctx, admin, "waiter")
		return p != nil && p.Status.Phase == v1.PodPending && waiting(p) == "ContainerCreating"
	}, func() string {
		if p := getPod(ctx, admin, "waiter"); p != nil {
			return fmt.Sprintf("waiter status: %+v", p.Status)
		}
		return "waiter not found"
	})
	// The first attempts may fail otherwise: until the Node authorizer's
	// graph has the pod, reading its configMap is forbidden ("no
	// relationship found between node ..."), as kubelet sees it too; the
	// retries reach the configMap's absence.
	const notFound = `reason=FailedMount pod=default/waiter volume=conf type=configMap err="configmap \"later\" not found"`
	waitFor(t, ctx, "a FailedMount line "+notFound+" in the node's log", func() bool {
		b, _ := os.ReadFile(n.LogPath)
		return strings.Contains(string(b), notFound)
	}, diag)

	waitFor(t, ctx, "a FailedMount event of the waiter in the API", func() bool {
		evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=waiter,reason=FailedMount"})
		if err != nil {
			return false
		}
		for _, ev := range evs.Items {
			if ev.Type == v1.EventTypeWarning && ev.Message == `MountVolume.SetUp failed for volume "conf" : configmap "later" not found` {
				return true
			}
		}
		return false
	}, diag)

	// An update reaches the mounted file.
	cm, err := admin.CoreV1().ConfigMaps("default").Get(ctx, "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["level"] = "debug"
	if _, err := admin.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the configMap update to reach the mounted file", func() bool { return read("level") == "debug" }, diag)

	// The missing configMap appears: the waiter starts.
	if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"},
		Data: map[string]string{"ready": "yes"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "waiter Running in the API with its configMap", func() bool {
		p := getPod(ctx, admin, "waiter")
		return p != nil && p.Status.Phase == v1.PodRunning && read("waiter") == "yes"
	}, diag)

	for _, name := range []string{"reader", "waiter"} {
		if err := admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, "both pods gone from the API", func() bool {
		return getPod(ctx, admin, "reader") == nil && getPod(ctx, admin, "waiter") == nil
	}, diag)
}
