package cluster_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/speclet/speclet/test/cluster"
)

// TestNodeServes: what a node joined to a cluster (speclet --runtime=sim
// under a real kube-apiserver) shows of itself: the version in its Node
// status.
func TestNodeServes(t *testing.T) {
	c := cluster.ForTest(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := cluster.BuildSpeclet(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const name = "node-serves"
	c.NodeForTest(ctx, t, cluster.NodeOptions{Name: name, Bin: bin, Dir: t.TempDir()})

	t.Run("kubeletVersion", func(t *testing.T) {
		var got string
		for deadline := time.Now().Add(90 * time.Second); got == ""; time.Sleep(200 * time.Millisecond) {
			if nd, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
				got = nd.Status.NodeInfo.KubeletVersion
			}
			if got == "" && time.Now().After(deadline) {
				t.Fatalf("node %s has no kubeletVersion in its status within 90 s", name)
			}
		}
		v, err := version.ParseSemantic(got)
		if err != nil {
			t.Fatalf("status.nodeInfo.kubeletVersion %q: %v", got, err)
		}
		if v.Major() != 1 || v.Minor() != 34 || v.Patch() != 4 || v.PreRelease() != "" {
			t.Errorf("status.nodeInfo.kubeletVersion %q: want 1.34.4 (the Kubernetes version speclet follows)", got)
		}
	})
}
