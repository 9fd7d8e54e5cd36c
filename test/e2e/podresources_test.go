package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// TestPodResources asks the daemon's pod-resources socket
// (<root-dir>/pod-resources/kubelet.sock) about pods on containerd: a
// running pod is in List and Get with its sidecar and containers (its
// finished init container is not); a pod that completed leaves List once
// stopped and Get still finds it; an unknown pod is kubelet's error. The
// node has no device plugins and no CPU or memory manager: no devices, CPU
// ids or memory anywhere.
func TestPodResources(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "prs")
	d.writeManifest(t, "prs", podSpec{name: "prs", grace: 1,
		init:       []ctr{{name: "setup", command: "true"}, {name: "proxy", command: handlesTERM, sidecar: true}},
		containers: []ctr{{name: "main", command: handlesTERM}, {name: "second", command: handlesTERM}}}.yaml(c))
	d.writeManifest(t, "prsdone", podSpec{name: "prsdone", restartPolicy: "Never", grace: 1,
		containers: []ctr{{name: "job", command: "true"}}}.yaml(c))
	running := d.waitPod(t, "prs", 2*time.Minute, "Running", isRunning)
	done := d.waitPod(t, "prsdone", 2*time.Minute, "Succeeded", func(p *v1.Pod) bool { return p != nil && p.Status.Phase == v1.PodSucceeded })

	conn, err := grpc.NewClient("unix://"+filepath.Join(d.rootDir, "pod-resources", "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cli := podresourcesv1.NewPodResourcesListerClient(conn)
	ctx := context.Background()
	containers := func(p *podresourcesv1.PodResources) string {
		var s []string
		for _, c := range p.GetContainers() {
			if len(c.GetDevices())+len(c.GetCpuIds())+len(c.GetMemory())+len(c.GetDynamicResources()) > 0 {
				t.Errorf("container %s of %s has resources on a node without device plugins or CPU/memory managers: %v", c.GetName(), p.GetName(), c)
			}
			s = append(s, c.GetName())
		}
		return strings.Join(s, ",")
	}
	find := func(list *podresourcesv1.ListPodResourcesResponse, name string) *podresourcesv1.PodResources {
		for _, p := range list.GetPodResources() {
			if p.GetName() == name && p.GetNamespace() == "default" {
				return p
			}
		}
		return nil
	}
	// The completed pod leaves List once its worker stopped it; the
	// running one stays. The calls stay under the rate limit (100/s).
	var list *podresourcesv1.ListPodResourcesResponse
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if list, err = cli.List(ctx, &podresourcesv1.ListPodResourcesRequest{}); err != nil {
			t.Fatalf("List: %v", err)
		}
		if find(list, done.Name) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("List still has the completed pod %s a minute after it succeeded: %v", done.Name, list)
		}
	}
	if p := find(list, running.Name); p == nil || containers(p) != "proxy,main,second" {
		t.Errorf("List = %v, want default/%s with containers proxy,main,second", list, running.Name)
	}
	for _, name := range []string{running.Name, done.Name} {
		got, err := cli.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: "default", PodName: name})
		want := map[string]string{running.Name: "proxy,main,second", done.Name: "job"}[name]
		if err != nil || got.GetPodResources().GetName() != name || containers(got.GetPodResources()) != want {
			t.Errorf("Get default/%s = %v, %v; want containers %s", name, got, err, want)
		}
	}
	_, err = cli.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: "default", PodName: "nope"})
	if st, _ := status.FromError(err); st.Code() != codes.Unknown || st.Message() != "pod nope in namespace default not found" {
		t.Errorf("Get default/nope: %v, want kubelet's not-found error", err)
	}
	alloc, err := cli.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil || len(alloc.GetDevices())+len(alloc.GetCpuIds())+len(alloc.GetMemory()) > 0 {
		t.Errorf("GetAllocatableResources = %v, %v; want nothing", alloc, err)
	}
	d.removeManifest(t, "prs")
	d.removeManifest(t, "prsdone")
	d.waitGone(t, "prs", 2*time.Minute)
	d.waitGone(t, "prsdone", 2*time.Minute)
	if _, err := cli.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodNamespace: "default", PodName: running.Name}); status.Code(err) != codes.Unknown {
		t.Errorf("Get of the removed pod %s: %v, want not found", running.Name, err)
	}
}
