package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/speclet/speclet/test/cluster"
)

// TestHollowNodes runs `speclet hollow --nodes 3` against a real control
// plane (API server, scheduler, controller-manager): the nodes hollow-0..2
// register with their own system:node identities (static tokens) and
// become Ready, each renews its Lease, a Deployment of 6 pods is scheduled
// onto them and every pod is Running and Ready in the API, and after the
// Deployment is deleted every pod is gone from the API (each node wrote
// the final status and deleted its pods).
func TestHollowNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("short: runs a control plane")
	}
	const nodes, replicas = 3, 6
	c := cluster.ForTest(t, cluster.Options{Scheduler: true, ControllerManager: true, HollowNodes: nodes})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := cluster.BuildSpeclet(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.StartHollow(ctx, cluster.HollowOptions{Bin: bin, Nodes: nodes, Dir: t.TempDir(), Args: []string{"-v", "2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("speclet hollow log:\n%s", h.LogTail(80))
		}
		if err := h.Stop(); err != nil {
			t.Error(err)
		}
	})
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	names := []string{cluster.HollowName(0), cluster.HollowName(1), cluster.HollowName(2)}
	if err := waitNodesReady(ctx, admin, names, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		node, err := admin.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(got, "speclet-sim://") {
			t.Errorf("node %s: containerRuntimeVersion %q, want the simulated runtime", n, got)
		}
		var lease *coordv1.Lease
		if lease, err = admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, n, metav1.GetOptions{}); err != nil {
			t.Errorf("node %s: lease: %v", n, err)
		} else if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != n {
			t.Errorf("node %s: lease holder %v", n, lease.Spec.HolderIdentity)
		}
	}

	d := hollowDeployment("hollow-web", "busybox:latest", replicas, nil)
	if _, err := admin.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	on, err := waitPods(ctx, admin, d.Name, 2*time.Minute, 200*time.Millisecond, func(total, running int) bool { return running == replicas })
	if err != nil {
		t.Fatal(err)
	}
	for n := range on {
		if !strings.HasPrefix(n, "hollow-") {
			t.Errorf("a pod runs on %q, not a hollow node", n)
		}
	}
	t.Logf("%d pods Running on %v", replicas, on)
	if err := admin.AppsV1().Deployments("default").Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	if _, err := waitPods(ctx, admin, d.Name, 2*time.Minute, 200*time.Millisecond, func(total, _ int) bool { return total == 0 }); err != nil {
		t.Fatal(err)
	}
	if h.Exited() {
		t.Fatalf("speclet hollow exited:\n%s", h.LogTail(40))
	}
}

func ptrTo[T any](v T) *T { return &v }
