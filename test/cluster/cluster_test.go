package cluster_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/speclet/speclet/test/cluster"
)

// TestControlPlane starts etcd and kube-apiserver and checks what a node
// agent relies on: the bootstrap objects exist, a node identity may register
// its own Node, and NodeRestriction refuses it another node's.
func TestControlPlane(t *testing.T) {
	c := cluster.ForTest(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("default ServiceAccount: %v", err)
	}
	cm, err := admin.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil || cm.Data["ca.crt"] == "" {
		t.Errorf("kube-root-ca.crt ConfigMap: %v (data %v)", err, cm)
	}

	kc, err := c.NodeKubeconfig("node-a")
	if err != nil {
		t.Fatal(err)
	}
	nodeA, err := cluster.Clientset(kc)
	if err != nil {
		t.Fatal(err)
	}
	own := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	if _, err := nodeA.CoreV1().Nodes().Create(ctx, own, metav1.CreateOptions{}); err != nil {
		t.Fatalf("node-a registers its own Node: %v", err)
	}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}
	_, err = nodeA.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("node-a creating Node node-b: got %v, want Forbidden (NodeRestriction)", err)
	}
	_, err = nodeA.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("node-a listing every Node: got %v, want Forbidden (Node authorizer)", err)
	}
	if _, err := nodeA.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=node-a"}); err != nil {
		t.Errorf("node-a listing its own Node by field selector: %v", err)
	}

	if err := c.RestartAPIServer(ctx); err != nil {
		t.Fatalf("restart API server: %v", err)
	}
	if _, err := admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err != nil {
		t.Errorf("Node node-a after an API server restart: %v", err)
	}
}
