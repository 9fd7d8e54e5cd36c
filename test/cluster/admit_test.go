package cluster_test

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// nodeBReserved are node-b's node allocatable flags.
var nodeBReserved = []string{
	"--kube-reserved", "cpu=100m,memory=64Mi",
	"--system-reserved", "cpu=50m,memory=32Mi,ephemeral-storage=1Gi",
	"--eviction-hard", "memory.available<150Mi,nodefs.available<10%",
}

// testAdmissionRefusals: pods that do not fit node-a fail in the API with
// kubelet's reason and message, without starting, while the pods admitted
// beside them keep running: a host port already taken (NodePorts), a
// nodeSelector the node's labels do not match (NodeAffinity). A pod
// naming an existing RuntimeClass runs with its handler.
func testAdmissionRefusals(t *testing.T, e *env) {
	ctx := context.Background()
	withPort := func(name string, port int32) *v1.Pod {
		p := e.pod(name, "node-a", v1.RestartPolicyAlways, "sleep 3600")
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: port, HostPort: port}}
		return p
	}
	e.create(t, withPort("port-holder", 18080))
	e.waitPod(t, "port-holder", 90*time.Second, "Running", running)

	e.create(t, withPort("port-taker", 18080))
	selector := e.pod("wants-ssd", "node-a", v1.RestartPolicyAlways, "sleep 3600")
	selector.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	e.create(t, selector)
	if _, err := e.admin.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Handler: "runc"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	classy := e.pod("classy", "node-a", v1.RestartPolicyAlways, "sleep 3600")
	classy.Spec.RuntimeClassName = ptr.To("plain")
	e.create(t, classy)

	for _, want := range []struct{ pod, reason, message string }{
		{"port-taker", "NodePorts", "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
		{"wants-ssd", "NodeAffinity", "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
	} {
		p := e.waitPod(t, want.pod, 60*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		if p.Status.Reason != want.reason || p.Status.Message != want.message {
			t.Errorf("pod %s: reason %q message %q, want %q %q", want.pod, p.Status.Reason, p.Status.Message, want.reason, want.message)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil || cs.ContainerID != "" {
				t.Errorf("refused pod %s has a container that ran: %+v", want.pod, cs)
			}
		}
	}
	// kubelet's rejectPod also records the refusal as a Warning event.
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := e.admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=port-taker"})
		found := false
		if err == nil {
			for _, ev := range l.Items {
				found = found || ev.Reason == "NodePorts" && ev.Type == v1.EventTypeWarning && ev.Source.Host == "node-a"
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Warning event NodePorts from node-a about port-taker (err %v)", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	p := e.waitPod(t, "classy", 90*time.Second, "Running", running)
	if p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("classy restarted: %s", describe(p))
	}
	holder := e.waitPod(t, "port-holder", 10*time.Second, "still Running", running)
	if holder.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("port-holder restarted beside the refusals: %s", describe(holder))
	}

	// Labelling the node makes a new pod with the same selector fit at
	// once: a pod refused only for node affinity is decided again against
	// the Node read afresh, as kubelet does.
	n, err := e.admin.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels["disk"] = "ssd"
	if _, err := e.admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	fits := e.pod("ssd-later", "node-a", v1.RestartPolicyAlways, "sleep 3600")
	fits.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	e.create(t, fits)
	e.waitPod(t, "ssd-later", 90*time.Second, "Running", running)
	for _, name := range []string{"port-holder", "port-taker", "wants-ssd", "classy", "ssd-later"} {
		if err := e.admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}); err != nil {
			t.Error(err)
		}
	}
	for _, name := range []string{"port-holder", "port-taker", "wants-ssd", "classy", "ssd-later"} {
		e.waitGone(t, name, 60*time.Second)
	}
}

// testNodeAllocatable: node-b's allocatable in the API is its capacity
// minus --kube-reserved, --system-reserved and --eviction-hard
// (memory.available from memory, nodefs.available from ephemeral-storage).
func testNodeAllocatable(t *testing.T, e *env) {
	n := e.waitNode(t, "node-b", 60*time.Second, v1.ConditionTrue)
	c, a := n.Status.Capacity, n.Status.Allocatable
	sub := func(q resource.Quantity, minus ...string) int64 {
		v := q.DeepCopy()
		for _, m := range minus {
			v.Sub(resource.MustParse(m))
		}
		return v.MilliValue()
	}
	if got, want := a.Cpu().MilliValue(), sub(*c.Cpu(), "100m", "50m"); got != want {
		t.Errorf("allocatable cpu %dm, want capacity %s - 100m - 50m = %dm", got, c.Cpu(), want)
	}
	if got, want := a.Memory().MilliValue(), sub(*c.Memory(), "64Mi", "32Mi", "150Mi"); got != want {
		t.Errorf("allocatable memory %s, want capacity %s - 64Mi - 32Mi - 150Mi", a.Memory(), c.Memory())
	}
	disk := c.StorageEphemeral()
	if disk.IsZero() {
		t.Fatalf("capacity has no ephemeral-storage: %v", c)
	}
	tenth := *resource.NewQuantity(disk.Value()/10, resource.BinarySI)
	if got, want := a.StorageEphemeral().MilliValue(), sub(*disk, "1Gi", tenth.String()); got != want {
		t.Errorf("allocatable ephemeral-storage %s, want capacity %s - 1Gi - 10%%", a.StorageEphemeral(), disk)
	}
	if !a.Pods().Equal(*c.Pods()) {
		t.Errorf("allocatable pods %s, want capacity's %s", a.Pods(), c.Pods())
	}
	// node-a runs with the defaults: only memory.available<100Mi.
	na := e.waitNode(t, "node-a", 60*time.Second, v1.ConditionTrue)
	if got, want := na.Status.Allocatable.Memory().MilliValue(), sub(*na.Status.Capacity.Memory(), "100Mi"); got != want {
		t.Errorf("node-a allocatable memory %s, want capacity %s - 100Mi", na.Status.Allocatable.Memory(), na.Status.Capacity.Memory())
	}
}

// testFinalStatusBeforeDelete: a watcher of a deleted pod sees its final
// status (Succeeded, the container terminated with exit code 0) before
// the object is deleted, as kubelet's status manager writes it.
func testFinalStatusBeforeDelete(t *testing.T, e *env) {
	ctx := context.Background()
	e.create(t, e.pod("final", "node-a", v1.RestartPolicyAlways, "trap 'exit 0' TERM; while true; do sleep 1; done"))
	p := e.waitPod(t, "final", 90*time.Second, "Running", running)
	w, err := e.admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=final", ResourceVersion: p.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := e.admin.CoreV1().Pods("default").Delete(ctx, "final", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](10)}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	var terminal *v1.Pod
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed; events %v", seen)
			}
			p, _ := ev.Object.(*v1.Pod)
			if p == nil {
				t.Fatalf("watch event %s %T", ev.Type, ev.Object)
			}
			seen = append(seen, string(ev.Type)+" "+string(p.Status.Phase))
			if ev.Type == watch.Modified && (p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed) && terminal == nil {
				terminal = p
			}
			if ev.Type != watch.Deleted {
				continue
			}
			if terminal == nil {
				t.Fatalf("pod deleted before its final status was written; events %v", seen)
			}
			cs := terminal.Status.ContainerStatuses
			if terminal.Status.Phase != v1.PodSucceeded || len(cs) != 1 || cs[0].State.Terminated == nil ||
				cs[0].State.Terminated.ExitCode != 0 || cs[0].State.Terminated.Reason != "Completed" {
				t.Errorf("final status %s: want Succeeded, main terminated with exit code 0 reason Completed", describe(terminal))
			}
			if p.Status.Phase != terminal.Status.Phase {
				t.Errorf("deleted object's phase %s, want the final %s", p.Status.Phase, terminal.Status.Phase)
			}
			return
		case <-timeout:
			t.Fatalf("pod final not deleted within 60s; events %v", seen)
		}
	}
}
