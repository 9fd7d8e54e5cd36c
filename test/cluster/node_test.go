package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/cluster"
)

// TestNodeRemoveUnmountsVolumes: a node stopped with its pods in place (as
// speclet stops: its pods keep running) and then stripped of them by its
// runtime still has the pods' volumes mounted under its root dir (the
// kube-api-access projected tmpfs); Node.Remove unmounts them and removes
// the node's directory. The cluster command's Ctrl-C left them mounted.
func TestNodeRemoveUnmountsVolumes(t *testing.T) {
	c := cluster.ForTest(t, cluster.Options{})
	cd := harness.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := cluster.BuildSpeclet(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "node-a")
	t.Cleanup(func() { harness.Unmount(dir) }) // before TempDir's removal, should the test fail
	n, err := c.StartNode(ctx, cluster.NodeOptions{Name: "node-a", Bin: bin, Containerd: cd, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of node-a:\n%s", n.LogTail(60))
		}
		n.Stop()
	})
	grace := int64(1)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "one"}, Spec: corev1.PodSpec{
		NodeName:                      "node-a",
		TerminationGracePeriodSeconds: &grace,
		Containers:                    []corev1.Container{{Name: "main", Image: cd.Registry.Ref(harness.BusyboxRepo), Command: []string{"sleep", "3600"}}},
	}}
	if pod, err = admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "one", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("pod one not Running: %v %v", p.Status.Phase, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	tokenMount := func() bool {
		for _, m := range harness.Mounts(dir) {
			if strings.Contains(m, "/pods/"+string(pod.UID)+"/volumes/kubernetes.io~projected/kube-api-access-") {
				return true
			}
		}
		return false
	}
	if !tokenMount() {
		t.Fatalf("no kube-api-access mount under %s: %v", dir, harness.Mounts(dir))
	}

	// The cluster command's order: the node stops, its runtime removes the
	// pods, then the node is removed.
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := cd.Stop(); err != nil {
		t.Fatal(err)
	}
	if !tokenMount() {
		t.Logf("the pod's volume was unmounted before Remove")
	}
	if err := n.Remove(); err != nil {
		t.Fatal(err)
	}
	if m := harness.Mounts(dir); len(m) > 0 {
		t.Errorf("mounts left after Remove: %v", m)
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Errorf("%s left after Remove", dir)
	}
}
