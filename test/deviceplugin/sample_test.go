package deviceplugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/cluster"
	dp "github.com/speclet/speclet/test/deviceplugin"
)

// wait is how long each awaited change may take.
const wait = 2 * time.Minute

// TestSamplePlugin: Kubernetes' sample device plugin (k8s.io/kubernetes
// v1.34.4, as a host process) on a speclet node on containerd under a
// real kube-apiserver, as kubelet v1.34.4's device manager treats it
// (pkg/kubelet/cm/devicemanager):
//   - registered: the Node's capacity and allocatable have its 2 devices;
//   - a pod asking for 1 runs, and its container has the file the
//     plugin's Allocate mounted, the device the pod-resources API names;
//   - the plugin killed: its devices are unhealthy, allocatable 0 and
//     capacity kept (within the 5 min endpoint grace), a new pod asking
//     for one is refused (UnexpectedAdmissionError, no healthy devices),
//     the running pod runs on;
//   - speclet restarted (same root dir): the pod keeps its container (same
//     ID, restart count 0) and its device (pod-resources List); the
//     resource, known from the checkpoint, is 0 until its plugin registers;
//   - the plugin started again: allocatable 2, a pod asking for 2 is
//     refused (1 available: the first pod's device is still held), a pod
//     asking for 1 gets the other device;
//   - speclet restarted with the plugin running: the plugin registers again
//     on the new registration socket, both pods keep their devices;
//   - a node reboot (speclet stopped, the plugin killed, every sandbox
//     removed, speclet started): both pods, admitted anew with the
//     checkpoint's devices while the plugin is not registered, are refused.
func TestSamplePlugin(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: the sample device plugin test runs containerd and mounts, and needs root")
		}
		t.Skip("the sample device plugin test runs containerd and mounts, and needs root")
	}
	plugin := samplePlugin(t)
	c := cluster.ForTest(t, cluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	cd := harness.ForTest(t)
	bin, err := cluster.BuildSpeclet(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	removeFiles := dp.DeviceFilesCleanup()
	t.Cleanup(func() {
		if err := removeFiles(); err != nil {
			t.Error(err)
		}
	})
	const node = "node-devices"
	dir := filepath.Join(t.TempDir(), "node")
	n := c.NodeForTest(ctx, t, cluster.NodeOptions{Name: node, Bin: bin, Containerd: cd, Dir: dir})
	root := filepath.Join(dir, "root")
	plugins := filepath.Join(root, "device-plugins")
	logDir := t.TempDir()
	h := &helper{t: t, ctx: ctx, admin: admin, node: n, root: root, image: cd.ImageRef(harness.BusyboxRepo)}

	var sample *dp.Sample
	startPlugin := func() {
		t.Helper()
		s, err := dp.StartSample(plugin, plugins, filepath.Join(logDir, "plugin.log"))
		if err != nil {
			t.Fatal(err)
		}
		sample = s
	}
	// Runs before NodeForTest's cleanup: the plugin goes before the node
	// and its directory.
	t.Cleanup(func() {
		if sample != nil {
			sample.Kill()
			if t.Failed() {
				t.Logf("sample device plugin log:\n%s", cluster.TailFile(sample.LogPath, 40))
			}
		}
	})

	startPlugin()
	h.waitNode("the plugin's 2 devices in capacity and allocatable", 2, 2)

	a := h.create(h.pod("with-device", 1))
	a = h.waitRunning(a.Name)
	idA := a.Status.ContainerStatuses[0].ContainerID
	devA := h.listed(a.Name, 1)[0]
	if got := h.seen(a.Name); got != devA {
		t.Fatalf("pod %s: its container sees device files %q, want %q (the device pod-resources lists)", a.Name, got, devA)
	}

	sample.Kill()
	h.waitNode("the plugin killed: capacity kept, allocatable 0", 2, 0)
	if got := h.allocatable(); len(got) != 0 {
		t.Errorf("pod-resources GetAllocatableResources with the plugin dead: %v, want none", got)
	}
	refused := h.create(h.pod("no-healthy-device", 1))
	h.waitRefused(refused.Name, "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices "+dp.Resource+", which is unexpected")
	h.sameContainer(a.Name, idA)

	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h.waitNode("speclet restarted, the plugin not registered: the checkpoint's resource at 0", 0, 0)
	h.sameContainer(a.Name, idA)
	if got := h.listed(a.Name, 1)[0]; got != devA {
		t.Errorf("after speclet's restart pod-resources lists %s for pod %s, want %s", got, a.Name, devA)
	}

	startPlugin()
	h.waitNode("the plugin registered again", 2, 2)
	two := h.create(h.pod("two-devices", 2))
	h.waitRefused(two.Name, "Allocate failed due to requested number of devices unavailable for "+dp.Resource+". Requested: 2, Available: 1, which is unexpected")
	b := h.create(h.pod("other-device", 1))
	b = h.waitRunning(b.Name)
	devB := h.listed(b.Name, 1)[0]
	if devB == devA {
		t.Errorf("pod %s got %s, which pod %s holds", b.Name, devB, a.Name)
	}
	if got := h.seen(b.Name); got != devB {
		t.Errorf("pod %s: its container sees device files %q, want %q", b.Name, got, devB)
	}

	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The new process knows no healthy device until the running plugin
	// registers on the new registration socket.
	for deadline := time.Now().Add(wait); len(h.allocatable()) != len(dp.Devices); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("speclet restarted with the plugin running: pod-resources allocatable devices %v, want %v (the plugin did not register again)", h.allocatable(), dp.Devices)
		}
	}
	h.waitNode("speclet restarted with the plugin running", 2, 2)
	h.sameContainer(a.Name, idA)
	if got := h.listed(a.Name, 1)[0]; got != devA {
		t.Errorf("after the second restart pod-resources lists %s for pod %s, want %s", got, a.Name, devA)
	}
	if got := h.listed(b.Name, 1)[0]; got != devB {
		t.Errorf("after the second restart pod-resources lists %s for pod %s, want %s", got, b.Name, devB)
	}
	if exited, err := sample.Exited(); exited {
		t.Errorf("the sample plugin exited: %v", err)
	}

	// A node reboot, as the node e2e suite makes one (device_plugin_test.go,
	// "Does not keep device plugin assignments across node reboots if fails
	// admission"): speclet stops, the pods' sandboxes are removed through
	// the CRI, speclet starts before the plugin. The pods, whose devices the
	// checkpoint holds, are admitted anew and refused: no healthy devices.
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	sample.Kill()
	removeSandboxes(t, ctx, cd.Endpoint)
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	noHealthy := "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices " + dp.Resource + ", which is unexpected"
	h.waitRefused(a.Name, noHealthy)
	h.waitRefused(b.Name, noHealthy)
	h.notListed(a.Name, b.Name)
}

// removeSandboxes stops and removes every pod sandbox of the runtime.
func removeSandboxes(t *testing.T, ctx context.Context, endpoint string) {
	t.Helper()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			t.Fatalf("stop sandbox %s: %v", sb.Id, err)
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			t.Fatalf("remove sandbox %s: %v", sb.Id, err)
		}
	}
}

// samplePlugin is the sample plugin's binary: built with CI=true, else the
// test skips when it is not built yet.
func samplePlugin(t *testing.T) string {
	t.Helper()
	if !dp.SampleCached(dp.DefaultVersion) && os.Getenv("CI") != "true" {
		t.Skip("the sample device plugin is not built; run `make sample-device-plugin` (minutes when cold) or set CI=true")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	bin, err := dp.BuildSample(ctx, dp.DefaultVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

type helper struct {
	t     *testing.T
	ctx   context.Context
	admin *kubernetes.Clientset
	node  *cluster.Node
	root  string
	image string
}

// pod is a busybox pod bound to the node asking for n devices; its
// container prints the sample plugin's device files it sees under /tmp,
// then sleeps.
func (h *helper) pod(name string, n int64) *v1.Pod {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName:                      h.node.Name,
			HostNetwork:                   true,
			RestartPolicy:                 v1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []v1.Container{{
				Name: "main", Image: h.image,
				Command:   []string{"sh", "-c", `echo "devices: $(cd /tmp && ls -d Dev-* 2>/dev/null | sort | tr '\n' ' ')"; exec sleep 100000`},
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{dp.Resource: q}},
			}},
		},
	}
}

func (h *helper) create(p *v1.Pod) *v1.Pod {
	h.t.Helper()
	got, err := h.admin.CoreV1().Pods(p.Namespace).Create(h.ctx, p, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("create pod %s: %v", p.Name, err)
	}
	return got
}

func (h *helper) get(name string) *v1.Pod {
	h.t.Helper()
	p, err := h.admin.CoreV1().Pods("default").Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatalf("get pod %s: %v", name, err)
	}
	return p
}

// waitRunning waits for the pod's container to run.
func (h *helper) waitRunning(name string) *v1.Pod {
	h.t.Helper()
	var p *v1.Pod
	for deadline := time.Now().Add(wait); ; time.Sleep(200 * time.Millisecond) {
		p = h.get(name)
		if p.Status.Phase == v1.PodFailed {
			h.t.Fatalf("pod %s failed: %s: %s", name, p.Status.Reason, p.Status.Message)
		}
		if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Running != nil && cs[0].ContainerID != "" {
			return p
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("pod %s not running within %s: %+v", name, wait, p.Status)
		}
	}
}

// waitRefused waits for the pod to fail admission with kubelet's reason
// UnexpectedAdmissionError and message "Pod was rejected: "+msg (kubelet's
// rejectPod), without a container.
func (h *helper) waitRefused(name, msg string) {
	h.t.Helper()
	for deadline := time.Now().Add(wait); ; time.Sleep(200 * time.Millisecond) {
		p := h.get(name)
		if p.Status.Phase == v1.PodFailed {
			if p.Status.Reason != "UnexpectedAdmissionError" || p.Status.Message != "Pod was rejected: "+msg {
				h.t.Errorf("pod %s failed with %q: %q, want UnexpectedAdmissionError: %q", name, p.Status.Reason, p.Status.Message, msg)
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.ContainerID != "" {
					h.t.Errorf("refused pod %s has container %s", name, cs.ContainerID)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("pod %s not refused within %s: %+v", name, wait, p.Status)
		}
	}
}

// waitNode waits for the Node's capacity and allocatable of the plugin's
// resource.
func (h *helper) waitNode(what string, capacity, allocatable int64) {
	h.t.Helper()
	var gotC, gotA string
	for deadline := time.Now().Add(wait); ; time.Sleep(200 * time.Millisecond) {
		nd, err := h.admin.CoreV1().Nodes().Get(h.ctx, h.node.Name, metav1.GetOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		c, okC := nd.Status.Capacity[dp.Resource]
		a, okA := nd.Status.Allocatable[dp.Resource]
		gotC, gotA = fmt.Sprint(okC, c.Value()), fmt.Sprint(okA, a.Value())
		if okC && okA && c.Value() == capacity && a.Value() == allocatable {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: node %s %s capacity (present, value) %s, allocatable %s, want %d and %d", what, h.node.Name, dp.Resource, gotC, gotA, capacity, allocatable)
		}
	}
}

// seen is what the pod's container printed of its device files.
func (h *helper) seen(name string) string {
	h.t.Helper()
	for deadline := time.Now().Add(wait); ; time.Sleep(200 * time.Millisecond) {
		out, err := h.admin.CoreV1().Pods("default").GetLogs(name, &v1.PodLogOptions{Container: "main"}).DoRaw(h.ctx)
		if err == nil {
			if _, after, ok := strings.Cut(string(out), "devices: "); ok {
				line, _, _ := strings.Cut(after, "\n")
				return strings.TrimSpace(line)
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("pod %s printed no device files within %s: %q %v", name, wait, out, err)
		}
	}
}

// sameContainer checks, on the node's read-only /pods (the running
// process's view) and in the API, that the pod's container is still id,
// running, never restarted.
func (h *helper) sameContainer(name, id string) {
	h.t.Helper()
	var last string
	for deadline := time.Now().Add(wait); ; time.Sleep(200 * time.Millisecond) {
		cs, err := h.nodeStatus(name)
		if err == nil && cs != nil && cs.State.Running != nil {
			if cs.ContainerID != id || cs.RestartCount != 0 {
				h.t.Fatalf("pod %s on the node: container %s, restart count %d, want %s and 0", name, cs.ContainerID, cs.RestartCount, id)
			}
			break
		}
		last = fmt.Sprint(cs, err)
		if time.Now().After(deadline) {
			h.t.Fatalf("pod %s: no running container on the node's /pods within %s: %s", name, wait, last)
		}
	}
	p := h.get(name)
	if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].ContainerID != id || cs[0].RestartCount != 0 || cs[0].State.Running == nil {
		h.t.Fatalf("pod %s in the API: %+v, want container %s running, restart count 0", name, p.Status.ContainerStatuses, id)
	}
}

// nodeStatus is the status of the pod's container on the node's /pods.
func (h *helper) nodeStatus(name string) (*v1.ContainerStatus, error) {
	resp, err := http.Get(h.node.Base + "/pods")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("/pods: %w", err)
	}
	for _, p := range list.Items {
		if p.Namespace == "default" && p.Name == name {
			for i := range p.Status.ContainerStatuses {
				if p.Status.ContainerStatuses[i].Name == "main" {
					return &p.Status.ContainerStatuses[i], nil
				}
			}
			return nil, nil
		}
	}
	return nil, fmt.Errorf("/pods: no pod %s", name)
}

// podResources calls the node's pod-resources API
// (<root-dir>/pod-resources/kubelet.sock), on a new connection: the socket
// is made anew at each start of speclet.
func (h *helper) podResources(call func(context.Context, podresourcesv1.PodResourcesListerClient) error) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(h.root, "pod-resources", "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	return call(ctx, podresourcesv1.NewPodResourcesListerClient(conn))
}

// listed are the plugin's devices pod-resources List gives the pod's
// container, sorted; there must be n.
func (h *helper) listed(name string, n int) []string {
	h.t.Helper()
	var devs []string
	var last error
	for deadline := time.Now().Add(wait); ; time.Sleep(200 * time.Millisecond) {
		devs, last = nil, nil
		found := false
		last = h.podResources(func(ctx context.Context, c podresourcesv1.PodResourcesListerClient) error {
			list, err := c.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
			if err != nil {
				return err
			}
			for _, p := range list.PodResources {
				if p.Namespace != "default" || p.Name != name {
					continue
				}
				for _, ctr := range p.Containers {
					if ctr.Name != "main" {
						continue
					}
					found = true
					for _, d := range ctr.Devices {
						if d.ResourceName == dp.Resource {
							devs = append(devs, d.DeviceIds...)
						}
					}
				}
			}
			return nil
		})
		if last == nil && found {
			break
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("pod-resources List: pod %s not listed within %s (%v)", name, wait, last)
		}
	}
	sort.Strings(devs)
	if len(devs) != n {
		h.t.Fatalf("pod-resources List: pod %s container main has %s devices %v, want %d", name, dp.Resource, devs, n)
	}
	return devs
}

// notListed checks that pod-resources List, which answers the active
// pods (kubelet v1.34's KubeletPodResourcesListUseActivePods), has none of
// the pods or no device for them.
func (h *helper) notListed(names ...string) {
	h.t.Helper()
	err := h.podResources(func(ctx context.Context, c podresourcesv1.PodResourcesListerClient) error {
		list, err := c.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
		if err != nil {
			return err
		}
		for _, p := range list.PodResources {
			for _, name := range names {
				if p.Namespace == "default" && p.Name == name {
					h.t.Errorf("pod-resources List has refused pod %s: %v", name, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		h.t.Errorf("pod-resources List: %v", err)
	}
}

// allocatable are the plugin's devices pod-resources
// GetAllocatableResources gives (nil when the API does not answer).
func (h *helper) allocatable() []string {
	var devs []string
	err := h.podResources(func(ctx context.Context, c podresourcesv1.PodResourcesListerClient) error {
		resp, err := c.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
		if err != nil {
			return err
		}
		for _, d := range resp.Devices {
			if d.ResourceName == dp.Resource {
				devs = append(devs, d.DeviceIds...)
			}
		}
		return nil
	})
	if err != nil {
		return nil
	}
	sort.Strings(devs)
	return devs
}
