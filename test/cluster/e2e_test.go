package cluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	certv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/cluster"
)

// env is one control plane with two speclet nodes, each on its own
// containerd.
type env struct {
	c      *cluster.Cluster
	admin  *kubernetes.Clientset
	a, b   *cluster.Node
	ca, cb *harness.Containerd
	image  string
	bin    string
	reg    *harness.Registry
}

func startEnv(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: cluster end-to-end tests run containerd and need root")
		}
		t.Skip("cluster end-to-end tests run containerd and need root")
	}
	c := cluster.ForTest(t, cluster.Options{Scheduler: true, ControllerManager: true})
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
	// One registry serves both containerds, so that one image reference
	// (a Deployment's) pulls on either node.
	reg, err := harness.StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if err := reg.PushDefaults(ctx); err != nil {
		t.Fatal(err)
	}
	e := &env{c: c, admin: admin, bin: bin, image: reg.Ref(harness.BusyboxRepo), reg: reg}
	for _, h := range []**harness.Containerd{&e.ca, &e.cb} {
		cd, err := harness.StartContainerd(ctx, harness.Options{Registry: reg, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := cd.Stop(); err != nil {
				t.Errorf("stop containerd: %v", err)
			}
		})
		*h = cd
	}
	for _, n := range []struct {
		name string
		cd   *harness.Containerd
		out  **cluster.Node
		args []string
	}{{"node-a", e.ca, &e.a, nil}, {"node-b", e.cb, &e.b, nodeBReserved}} {
		*n.out = c.NodeForTest(ctx, t, cluster.NodeOptions{Name: n.name, Bin: bin, Containerd: n.cd, Dir: t.TempDir(), Args: n.args})
	}
	return e
}

// pod is a hostNetwork busybox pod bound to node. It mounts no service
// account token (automountServiceAccountToken: false): projected volumes
// are another package's work.
func (e *env) pod(name, node string, restart v1.RestartPolicy, script string) *v1.Pod {
	image := e.image
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName:                      node,
			HostNetwork:                   true,
			RestartPolicy:                 restart,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers: []v1.Container{{
				Name: "main", Image: image, Command: []string{"sh", "-c", script},
			}},
		},
	}
}

func (e *env) create(t *testing.T, p *v1.Pod) *v1.Pod {
	t.Helper()
	got, err := e.admin.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", p.Name, err)
	}
	return got
}

// waitPod polls the API until cond holds for pod ns/name.
func (e *env) waitPod(t *testing.T, name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var last *v1.Pod
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		p, err := e.admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			last = p
			if cond(p) {
				return p
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("pod %s: not %s within %s; last status: %s", name, what, timeout, describe(last))
	return nil
}

func (e *env) waitGone(t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		_, err := e.admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("pod %s still in the API after %s", name, timeout)
}

func describe(p *v1.Pod) string {
	if p == nil {
		return "<none>"
	}
	b, _ := json.Marshal(p.Status)
	return string(b)
}

func running(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 1 {
		return false
	}
	cs := p.Status.ContainerStatuses[0]
	return cs.State.Running != nil && cs.Ready
}

func condition(p *v1.Pod, typ v1.PodConditionType) v1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func nodeReady(n *v1.Node) v1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func (e *env) waitNode(t *testing.T, name string, timeout time.Duration, want v1.ConditionStatus) *v1.Node {
	t.Helper()
	var last *v1.Node
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		n, err := e.admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			last = n
			if nodeReady(n) == want {
				return n
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("node %s: Ready is not %s within %s; conditions %+v", name, want, timeout, last)
	return nil
}

// nodePods are the pod names the node's read-only /pods lists.
func nodePods(t *testing.T, n *cluster.Node) []string {
	t.Helper()
	var out []string
	for _, p := range nodePodList(t, n).Items {
		out = append(out, p.Name)
	}
	return out
}

// nodePodList is the node's read-only /pods.
func nodePodList(t *testing.T, n *cluster.Node) v1.PodList {
	t.Helper()
	resp, err := http.Get(n.Base + "/pods")
	if err != nil {
		t.Fatalf("GET %s/pods: %v", n.Name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var l v1.PodList
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("decode %s/pods: %v", n.Name, err)
	}
	return l
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestCluster runs two speclet nodes under a real kube-apiserver (Node
// authorizer, NodeRestriction) on real containerd and checks what a cluster
// user sees through the API.
func TestCluster(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()

	t.Run("NodeReadyWithLease", func(t *testing.T) {
		n := e.waitNode(t, "node-a", 60*time.Second, v1.ConditionTrue)
		for k, want := range map[string]string{"kubernetes.io/hostname": "node-a", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"} {
			if got := n.Labels[k]; got != want && !(k == "kubernetes.io/arch" && got != "") {
				t.Errorf("label %s = %q, want %q", k, got, want)
			}
		}
		if !strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") {
			t.Errorf("nodeInfo.containerRuntimeVersion = %q, want containerd://...", n.Status.NodeInfo.ContainerRuntimeVersion)
		}
		if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Type != v1.NodeInternalIP || n.Status.Addresses[0].Address != "127.0.0.1" {
			t.Errorf("addresses = %+v, want InternalIP 127.0.0.1 first", n.Status.Addresses)
		}
		if n.Status.Capacity.Cpu().IsZero() || n.Status.Allocatable.Memory().IsZero() || n.Status.Capacity.Pods().Value() != 110 {
			t.Errorf("capacity %v allocatable %v: want cpu, memory and 110 pods", n.Status.Capacity, n.Status.Allocatable)
		}
		for _, c := range n.Status.Conditions {
			if c.Type != v1.NodeReady && c.Status != v1.ConditionFalse {
				t.Errorf("condition %s = %s (%s), want False", c.Type, c.Status, c.Reason)
			}
		}
		l, err := e.admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("lease: %v", err)
		}
		if got := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); got != 40 {
			t.Errorf("lease duration %d, want 40", got)
		}
		first := l.Spec.RenewTime.Time
		deadline := time.Now().Add(30 * time.Second)
		for {
			l, err = e.admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-a", metav1.GetOptions{})
			if err == nil && l.Spec.RenewTime.After(first) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("lease of node-a not renewed after %s (renewTime %s)", first, l.Spec.RenewTime)
			}
			time.Sleep(time.Second)
		}
	})

	t.Run("PodRunsWithKubeletStatus", func(t *testing.T) {
		e.create(t, e.pod("web", "node-a", v1.RestartPolicyAlways, "sleep 3600"))
		p := e.waitPod(t, "web", 90*time.Second, "Running and ready", running)
		cs := p.Status.ContainerStatuses[0]
		if !strings.HasPrefix(cs.ContainerID, "containerd://") || cs.ImageID == "" || cs.RestartCount != 0 || cs.Started == nil || !*cs.Started {
			t.Errorf("container status %+v: want a containerd:// ID, an imageID, started, restartCount 0", cs)
		}
		for _, typ := range []v1.PodConditionType{v1.PodReady, v1.ContainersReady, v1.PodInitialized, v1.PodScheduled, v1.PodReadyToStartContainers} {
			if condition(p, typ) != v1.ConditionTrue {
				t.Errorf("condition %s = %q, want True", typ, condition(p, typ))
			}
		}
		if p.Status.HostIP != "127.0.0.1" || p.Status.PodIP != "127.0.0.1" || p.Status.StartTime == nil || p.Status.QOSClass != v1.PodQOSBestEffort {
			t.Errorf("hostIP %q podIP %q startTime %v qos %q: want 127.0.0.1, 127.0.0.1, set, BestEffort", p.Status.HostIP, p.Status.PodIP, p.Status.StartTime, p.Status.QOSClass)
		}
	})

	t.Run("KubectlLogsAndExecReachTheNode", func(t *testing.T) {
		// kube-apiserver proxies to the node's kubelet API (--port) with
		// its client certificate; the node authorizes it through
		// SubjectAccessReview, its default with --kubeconfig (StartNode
		// gives no --authorization-mode). A service account's token on the
		// node's port is refused (403).
		e.create(t, e.pod("talk", "node-a", v1.RestartPolicyAlways, "echo hello-from-talk; sleep 3600"))
		e.waitPod(t, "talk", 90*time.Second, "Running", running)
		kubectl := func(args ...string) string {
			t.Helper()
			cmd := exec.Command(filepath.Join(e.c.BinDir, "kubectl"), append([]string{"--kubeconfig", e.c.AdminKubeconfig(), "-n", "default"}, args...)...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return string(out)
		}
		if out := kubectl("logs", "talk"); !strings.Contains(out, "hello-from-talk") {
			t.Errorf("kubectl logs talk = %q, want the container's output", out)
		}
		if out := kubectl("exec", "talk", "--", "sh", "-c", "echo hi"); strings.TrimSpace(out) != "hi" {
			t.Errorf("kubectl exec talk -- sh -c 'echo hi' = %q, want hi", out)
		}
		// The node runs with speclet's default authorization (Webhook with
		// --kubeconfig): a service account's token is authenticated, then
		// refused, on the node's port itself.
		if err := e.c.EnsureNamespace(ctx, "default"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.admin.CoreV1().ServiceAccounts("default").Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		tr, err := e.admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, "intruder", &authnv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		for _, r := range []struct{ method, path string }{
			{"GET", "/containerLogs/default/talk/main"},
			{"POST", "/exec/default/talk/main?command=id&stdout=1"},
			{"GET", "/pods"},
		} {
			req, _ := http.NewRequest(r.method, e.a.API+r.path, nil)
			req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "system:serviceaccount:default:intruder") {
				t.Errorf("%s %s with a service account's token: %d %q, want 403 naming the service account", r.method, r.path, resp.StatusCode, body)
			}
		}
	})

	t.Run("KubectlTopShowsNodesAndPods", func(t *testing.T) { testKubectlTop(t, e) })

	t.Run("TwoNodesRunOnlyTheirPods", func(t *testing.T) {
		e.create(t, e.pod("on-b", "node-b", v1.RestartPolicyAlways, "sleep 3600"))
		e.waitPod(t, "on-b", 90*time.Second, "Running on node-b", running)
		if a := nodePods(t, e.a); contains(a, "on-b") || !contains(a, "web") {
			t.Errorf("node-a runs %v: want web, never on-b", a)
		}
		if b := nodePods(t, e.b); !contains(b, "on-b") || contains(b, "web") {
			t.Errorf("node-b runs %v: want on-b, never web", b)
		}
		kc, _ := e.c.NodeKubeconfig("node-a")
		asA, err := cluster.Clientset(kc)
		if err != nil {
			t.Fatal(err)
		}
		nb, err := e.admin.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nb.Labels["stolen"] = "yes"
		if _, err := asA.CoreV1().Nodes().Update(ctx, nb, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("node-a updating Node node-b: %v, want Forbidden", err)
		}
		pb, err := e.admin.CoreV1().Pods("default").Get(ctx, "on-b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pb.Status.Phase = v1.PodFailed
		if _, err := asA.CoreV1().Pods("default").UpdateStatus(ctx, pb, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("node-a writing the status of node-b's pod: %v, want Forbidden", err)
		}
		if err := asA.CoreV1().Pods("default").Delete(ctx, "on-b", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("node-a deleting node-b's pod: %v, want Forbidden", err)
		}
	})

	t.Run("DeploymentThroughKubectlAndScheduler", func(t *testing.T) {
		manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: spread, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: spread}}
  template:
    metadata: {labels: {app: spread}}
    spec:
      hostNetwork: true
      automountServiceAccountToken: false
      containers:
      - {name: main, image: %s, command: [sleep, "3600"]}
`, e.image)
		path := filepath.Join(t.TempDir(), "deploy.yaml")
		if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(e.c.BinDir, "kubectl"), "--kubeconfig", e.c.AdminKubeconfig(), "apply", "-f", path)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, out)
		}
		deadline := time.Now().Add(3 * time.Minute)
		for {
			l, err := e.admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=spread"})
			nodes, run := map[string]bool{}, 0
			if err == nil {
				for i := range l.Items {
					if running(&l.Items[i]) {
						run++
						nodes[l.Items[i].Spec.NodeName] = true
					}
				}
			}
			if run == 3 {
				if !nodes["node-a"] || !nodes["node-b"] || len(nodes) != 2 {
					t.Errorf("the 3 replicas run on %v, want both node-a and node-b", nodes)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of 3 replicas Running after 3 minutes (err %v)", run, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err := e.admin.AppsV1().Deployments("default").Delete(ctx, "spread", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("FailingPodIsFailedWithExitCode", func(t *testing.T) {
		e.create(t, e.pod("fails", "node-a", v1.RestartPolicyNever, "exit 3"))
		p := e.waitPod(t, "fails", 90*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		cs := p.Status.ContainerStatuses
		if len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 3 || cs[0].State.Terminated.Reason != "Error" {
			t.Errorf("container statuses %+v: want terminated, exit code 3, reason Error", cs)
		}
	})

	t.Run("AdmissionRefusalsAreFailedPods", func(t *testing.T) { testAdmissionRefusals(t, e) })
	t.Run("NodeAllocatableIsCapacityMinusReserved", func(t *testing.T) { testNodeAllocatable(t, e) })
	t.Run("DeletedPodFinalStatusBeforeDelete", func(t *testing.T) { testFinalStatusBeforeDelete(t, e) })
	t.Run("EvictionUnderMemoryPressure", func(t *testing.T) { testEvictionUnderMemoryPressure(t, e) })
	t.Run("KernelOOMOutsidePodsIsNoSystemOOM", func(t *testing.T) { testKernelOOMOutsidePods(t, e) })

	t.Run("CrashLoopHasBackOffEvent", func(t *testing.T) {
		e.create(t, e.pod("crash", "node-a", v1.RestartPolicyAlways, "exit 1"))
		deadline := time.Now().Add(90 * time.Second)
		for {
			l, err := e.admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=crash"})
			reasons := map[string]bool{}
			if err == nil {
				for _, ev := range l.Items {
					reasons[ev.Reason] = true
					if ev.Reason == "BackOff" && (ev.Type != v1.EventTypeWarning || ev.Source.Host != "node-a" || ev.InvolvedObject.FieldPath != "spec.containers{main}") {
						t.Errorf("BackOff event %+v: want a Warning from node-a about spec.containers{main}", ev)
					}
				}
			}
			if reasons["BackOff"] && reasons["Started"] && reasons["Created"] && reasons["Pulled"] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("events of pod crash: reasons %v (err %v), want Pulled, Created, Started and BackOff", reasons, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err := e.admin.CoreV1().Pods("default").Delete(ctx, "crash", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		e.waitGone(t, "crash", 60*time.Second)
	})

	t.Run("GracefulDeletionStopsAndDisappears", func(t *testing.T) {
		e.create(t, e.pod("bye", "node-a", v1.RestartPolicyAlways, "trap 'exit 0' TERM; while true; do sleep 1; done"))
		p := e.waitPod(t, "bye", 90*time.Second, "Running", running)
		if err := e.admin.CoreV1().Pods("default").Delete(ctx, "bye", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](5)}); err != nil {
			t.Fatal(err)
		}
		e.waitGone(t, "bye", 30*time.Second)
		if contains(nodePods(t, e.a), "bye") {
			t.Errorf("node-a still runs bye after its object is gone")
		}
		_ = p
	})

	t.Run("StaticPodHasMirrorPod", func(t *testing.T) {
		manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: static}
spec:
  hostNetwork: true
  containers:
  - {name: main, image: %s, command: [sleep, "3600"]}
`, e.image)
		if err := os.WriteFile(filepath.Join(e.a.Manifests, "static.yaml"), []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		p := e.waitPod(t, "static-node-a", 90*time.Second, "a Running mirror pod", running)
		if p.Annotations["kubernetes.io/config.mirror"] == "" {
			t.Errorf("mirror pod without kubernetes.io/config.mirror: %v", p.Annotations)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].Kind != "Node" || p.OwnerReferences[0].Name != "node-a" {
			t.Errorf("mirror pod owners %+v, want the Node node-a", p.OwnerReferences)
		}
		old := p.UID
		if err := e.admin.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		p = e.waitPod(t, "static-node-a", 60*time.Second, "a new mirror pod", func(p *v1.Pod) bool { return p.UID != old && running(p) })
		if p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("deleting the mirror pod restarted the static pod: %+v", p.Status.ContainerStatuses[0])
		}
		// An edited manifest replaces the mirror pod.
		edited := strings.Replace(manifest, "metadata: {name: static}", "metadata: {name: static, labels: {edited: \"yes\"}}", 1)
		if err := os.WriteFile(filepath.Join(e.a.Manifests, "static.yaml"), []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		e.waitPod(t, "static-node-a", 60*time.Second, "a mirror pod of the edited manifest", func(p *v1.Pod) bool { return p.Labels["edited"] == "yes" && running(p) })
	})

	t.Run("RemovedStaticPodLosesItsMirrorPod", func(t *testing.T) {
		manifest := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: brief}\nspec:\n  hostNetwork: true\n  containers:\n  - {name: main, image: %s, command: [sleep, \"3600\"]}\n", e.image)
		path := filepath.Join(e.a.Manifests, "brief.yaml")
		if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		e.waitPod(t, "brief-node-a", 90*time.Second, "a Running mirror pod", running)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		e.waitGone(t, "brief-node-a", 60*time.Second)
	})

	t.Run("APIServerRestartLosesAndDuplicatesNothing", func(t *testing.T) {
		before := e.waitPod(t, "web", 10*time.Second, "Running", running)
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := e.c.RestartAPIServer(rctx); err != nil {
			t.Fatal(err)
		}
		e.create(t, e.pod("after-restart", "node-a", v1.RestartPolicyAlways, "sleep 3600"))
		e.waitPod(t, "after-restart", 90*time.Second, "Running", running)
		after := e.waitPod(t, "web", 10*time.Second, "Running", running)
		if after.UID != before.UID || after.Status.ContainerStatuses[0].ContainerID != before.Status.ContainerStatuses[0].ContainerID {
			t.Errorf("web changed across the API server restart: %s %s -> %s %s", before.UID, before.Status.ContainerStatuses[0].ContainerID, after.UID, after.Status.ContainerStatuses[0].ContainerID)
		}
		names := nodePods(t, e.a)
		seen := map[string]int{}
		for _, n := range names {
			seen[n]++
		}
		for n, k := range seen {
			if k > 1 {
				t.Errorf("node-a runs %d pods named %s", k, n)
			}
		}
	})

	t.Run("SpecletRestartAdoptsPods", func(t *testing.T) {
		before := e.waitPod(t, "web", 10*time.Second, "Running", running)
		failed := e.waitPod(t, "fails", 10*time.Second, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		if err := e.a.Stop(); err != nil {
			t.Fatal(err)
		}
		if err := e.a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second) // past the engine's source settling, when orphans would be killed
		after := e.waitPod(t, "web", 30*time.Second, "Running", running)
		if got, want := after.Status.ContainerStatuses[0], before.Status.ContainerStatuses[0]; got.ContainerID != want.ContainerID || got.RestartCount != 0 {
			t.Errorf("web's container after a speclet restart: %s restarts %d, want %s restarts 0", got.ContainerID, got.RestartCount, want.ContainerID)
		}
		// A pod whose API phase is terminal never runs again.
		if contains(nodePods(t, e.a), "fails") {
			t.Errorf("node-a runs the Failed pod fails again after its restart")
		}
		now := e.waitPod(t, "fails", 10*time.Second, "still Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		if now.Status.ContainerStatuses[0].ContainerID != failed.Status.ContainerStatuses[0].ContainerID {
			t.Errorf("fails got a new container after the restart: %+v", now.Status.ContainerStatuses[0])
		}
	})

	t.Run("StartsWithoutAPIServer", func(t *testing.T) {
		if err := e.a.Stop(); err != nil {
			t.Fatal(err)
		}
		e.c.StopAPIServer()
		// The node comes up (its /healthz is the engine's) and keeps its
		// static pod running while the API server is away.
		if err := e.a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second) // past the engine's source settling, when orphans would be killed
		if !contains(nodePods(t, e.a), "static-node-a") {
			t.Errorf("node-a does not run its static pod while the API server is down: %v", nodePods(t, e.a))
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := e.c.StartAPIServer(rctx); err != nil {
			t.Fatal(err)
		}
		before := e.waitPod(t, "web", 60*time.Second, "Running", running)
		if before.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("web restarted while the API server was down: %+v", before.Status.ContainerStatuses[0])
		}
		e.create(t, e.pod("after-outage", "node-a", v1.RestartPolicyAlways, "sleep 3600"))
		e.waitPod(t, "after-outage", 90*time.Second, "Running", running)
	})

	t.Run("WrongCredentialsAreAClearError", func(t *testing.T) {
		kc := filepath.Join(t.TempDir(), "bad.kubeconfig")
		crt, _ := e.c.CA()
		bad := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: %q, certificate-authority: %q}\nusers:\n- name: u\n  user: {token: not-a-valid-token}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n", e.c.URL, crt)
		if err := os.WriteFile(kc, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		n, err := e.c.StartNode(ctx, cluster.NodeOptions{Name: "node-bad", Bin: e.bin, Dir: t.TempDir(), Kubeconfig: kc})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Stop()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(n.LogTail(200), "register node node-bad failed") {
			if time.Now().After(deadline) {
				t.Fatalf("no registration error logged within 30s; log:\n%s", n.LogTail(40))
			}
			time.Sleep(200 * time.Millisecond)
		}
		log := n.LogTail(200)
		if !strings.Contains(log, "refused the node's credentials") && !strings.Contains(log, "forbids it") {
			t.Errorf("the registration error does not say the credentials were refused; log:\n%s", log)
		}
		if _, err := e.admin.CoreV1().Nodes().Get(ctx, "node-bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Node node-bad: %v, want NotFound", err)
		}
	})

	t.Run("ContainerdDownMakesNodeNotReady", func(t *testing.T) {
		e.waitNode(t, "node-b", 30*time.Second, v1.ConditionTrue)
		if err := syscall.Kill(e.cb.PID(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		n := e.waitNode(t, "node-b", 60*time.Second, v1.ConditionFalse)
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && (c.Reason != "KubeletNotReady" || c.Message == "") {
				t.Errorf("Ready condition %+v: want reason KubeletNotReady and the runtime's error", c)
			}
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := e.cb.Restart(rctx); err != nil {
			t.Fatal(err)
		}
		e.waitNode(t, "node-b", 60*time.Second, v1.ConditionTrue)
	})

	t.Run("ServingCertificateThroughCSR", func(t *testing.T) {
		// speclet --rotate-server-certificates: the node asks the cluster
		// for its kubelet API certificate; an administrator approves,
		// kube-controller-manager signs with the cluster CA.
		dir := t.TempDir()
		n, err := e.c.StartNode(ctx, cluster.NodeOptions{Name: "node-c", Bin: e.bin, Dir: dir, Args: []string{"--rotate-server-certificates"}})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			n.Stop()
			e.admin.CoreV1().Nodes().Delete(ctx, "node-c", metav1.DeleteOptions{})
		}()
		var csr *certv1.CertificateSigningRequest
		deadline := time.Now().Add(60 * time.Second)
		for csr == nil {
			l, err := e.admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range l.Items {
					if l.Items[i].Spec.Username == "system:node:node-c" {
						csr = &l.Items[i]
					}
				}
			}
			if csr == nil && time.Now().After(deadline) {
				t.Fatalf("no CertificateSigningRequest of node-c within 60s (%v); log:\n%s", err, n.LogTail(30))
			}
			time.Sleep(200 * time.Millisecond)
		}
		if csr.Spec.SignerName != "kubernetes.io/kubelet-serving" {
			t.Errorf("signer %q, want kubernetes.io/kubelet-serving", csr.Spec.SignerName)
		}
		// before the approval there is no certificate to serve
		caPath, _ := e.c.CA()
		caPEM, err := os.ReadFile(caPath)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		addr := strings.TrimPrefix(n.API, "https://")
		if conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool}); err == nil {
			conn.Close()
			t.Errorf("a TLS handshake before the approval succeeded")
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
			Type: certv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "AdminApproved"})
		if _, err := e.admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		var leaf *x509.Certificate
		deadline = time.Now().Add(60 * time.Second)
		for leaf == nil {
			if conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool}); err == nil {
				leaf = conn.ConnectionState().PeerCertificates[0]
				conn.Close()
			} else if time.Now().After(deadline) {
				t.Fatalf("node-c's kubelet API does not serve a cluster-signed certificate within 60s: %v; log:\n%s", err, n.LogTail(30))
			}
			time.Sleep(200 * time.Millisecond)
		}
		if leaf.Subject.CommonName != "system:node:node-c" || leaf.VerifyHostname("127.0.0.1") != nil || leaf.VerifyHostname("node-c") != nil {
			t.Errorf("served certificate %s for %v %v: want system:node:node-c for 127.0.0.1 and node-c", leaf.Subject, leaf.DNSNames, leaf.IPAddresses)
		}
		stored, err := tls.LoadX509KeyPair(filepath.Join(dir, "root", "pki", "kubelet-server-current.pem"), filepath.Join(dir, "root", "pki", "kubelet-server-current.pem"))
		if err != nil || stored.Leaf.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
			t.Errorf("root-dir/pki/kubelet-server-current.pem: %v; want the served certificate and its key", err)
		}
	})
}
