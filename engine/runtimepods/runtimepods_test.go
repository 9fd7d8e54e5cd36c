package runtimepods

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func sandbox(id, uid string, created int64, ready bool, grace string) *runtimeapi.PodSandbox {
	s := &runtimeapi.PodSandbox{Id: id, CreatedAt: created, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		Labels: map[string]string{LabelPodUID: uid, LabelPodName: "web", LabelPodNamespace: "default"}}
	if uid == "" {
		s.Labels = map[string]string{"example.com/owner": "someone-else"}
	}
	if ready {
		s.State = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	if grace != "" {
		s.Annotations = map[string]string{AnnotationGracePeriod: grace}
	}
	return s
}

func container(id, uid, name string, created int64, restarts string) *runtimeapi.Container {
	c := &runtimeapi.Container{Id: id, CreatedAt: created, Labels: map[string]string{LabelPodUID: uid, LabelContainerName: name}}
	if restarts != "" {
		c.Annotations = map[string]string{AnnotationRestartCount: restarts}
	}
	return c
}

// TestGroup: what a restarted engine finds of its pods. Objects are grouped
// by the pod UID label (others' are left out), sandboxes newest first,
// each container's instances by restart count then creation, and the grace
// period comes from the newest sandbox that recorded one.
func TestGroup(t *testing.T) {
	sbs := []*runtimeapi.PodSandbox{
		sandbox("sb-old", "u1", 10, false, "30"),
		sandbox("sb-new", "u1", 20, true, "5"),
		sandbox("sb-foreign", "", 30, true, ""),
		sandbox("sb-2", "u2", 15, false, "x"),
	}
	cs := []*runtimeapi.Container{
		container("app-1", "u1", "app", 11, "1"),
		container("app-0", "u1", "app", 12, "0"), // created later, restarted less: older
		container("app-2", "u1", "app", 21, "2"),
		container("log-a", "u1", "log", 11, ""),
		container("log-b", "u1", "log", 22, ""),
		container("foreign", "", "app", 1, ""),
		container("only-ctr", "u3", "job", 5, "7"),
	}
	pods := Group(sbs, cs)
	if len(pods) != 3 {
		t.Fatalf("%d pods, want u1, u2, u3", len(pods))
	}
	u1 := pods["u1"]
	ids := func(ss []*runtimeapi.PodSandbox) (out []string) {
		for _, s := range ss {
			out = append(out, s.Id)
		}
		return out
	}
	cids := func(cs []*runtimeapi.Container) (out []string) {
		for _, c := range cs {
			out = append(out, c.Id)
		}
		return out
	}
	if got := ids(u1.Sandboxes); !slices.Equal(got, []string{"sb-new", "sb-old"}) {
		t.Errorf("u1 sandboxes %v, want newest first", got)
	}
	if u1.Name != "web" || u1.Namespace != "default" || u1.Grace != 5 {
		t.Errorf("u1 is %s/%s grace %d, want default/web grace 5 (the newest sandbox's)", u1.Namespace, u1.Name, u1.Grace)
	}
	if got := cids(u1.Containers["app"]); !slices.Equal(got, []string{"app-2", "app-1", "app-0"}) {
		t.Errorf("app instances %v, want by restart count", got)
	}
	if got := cids(u1.Containers["log"]); !slices.Equal(got, []string{"log-b", "log-a"}) {
		t.Errorf("log instances %v, want newest created first", got)
	}
	if r := u1.ReadySandbox(); r == nil || r.Id != "sb-new" {
		t.Errorf("u1 ready sandbox %v, want sb-new", r)
	}
	if u2 := pods["u2"]; u2.Grace != -1 || u2.ReadySandbox() != nil {
		t.Errorf("u2 grace %d (annotation not a number: want -1), ready sandbox %v (want none)", u2.Grace, u2.ReadySandbox())
	}
	if u3 := pods["u3"]; len(u3.Sandboxes) != 0 || len(u3.Containers["job"]) != 1 {
		t.Errorf("u3: %d sandboxes, %d job instances; want a container without its sandbox", len(u3.Sandboxes), len(u3.Containers["job"]))
	}
	o := Orphan(u1)
	if o.UID != "u1" || o.Name != "web" || o.Spec.TerminationGracePeriodSeconds == nil || *o.Spec.TerminationGracePeriodSeconds != 5 || len(o.Spec.Containers) != 2 {
		t.Errorf("orphan stand-in %+v, want u1 default/web with grace 5 and its two container names", o)
	}
	if o := Orphan(pods["u2"]); o.Spec.TerminationGracePeriodSeconds != nil {
		t.Errorf("u2's stand-in has grace %d, want the pod's default (unset)", *o.Spec.TerminationGracePeriodSeconds)
	}
}

// TestLabelsRoundTrip: the labels written on a pod's objects name it back.
func TestLabelsRoundTrip(t *testing.T) {
	pod := &v1.Pod{}
	pod.UID, pod.Name, pod.Namespace = "u9", "db", "prod"
	uid, name := Identify(ContainerLabels(pod, "main"))
	if uid != "u9" || name != "main" {
		t.Errorf("Identify = %s, %s; want u9, main", uid, name)
	}
	if uid, name := Identify(PodLabels(pod)); uid != "u9" || name != "" {
		t.Errorf("Identify(sandbox labels) = %s, %q; want u9 and no container", uid, name)
	}
	if uid, _ := Identify(map[string]string{"example.com/owner": "x"}); uid != "" {
		t.Errorf("an object of no agent is identified as %s", uid)
	}
	// kubelet's labels alone (a pod kubelet started) name the pod too.
	kl := map[string]string{KubeletPodUID: "k1", KubeletPodName: "web-n", KubeletPodNamespace: "kube-system", KubeletContainerName: "app"}
	if uid, name := Identify(kl); uid != "k1" || name != "app" || PodNameOf(kl) != "web-n" || PodNamespaceOf(kl) != "kube-system" {
		t.Errorf("kubelet's labels identify %s %s %s/%s; want k1 app kube-system/web-n", uid, name, PodNamespaceOf(kl), PodNameOf(kl))
	}
	if l := ContainerLabels(pod, "main"); l[KubeletPodUID] != "u9" || l[KubeletPodName] != "db" || l[KubeletPodNamespace] != "prod" || l[KubeletContainerName] != "main" {
		t.Errorf("container labels %v lack kubelet's", l)
	}
	if got := RestartCountOf(map[string]string{KubeletRestartCount: "3"}); got != 3 {
		t.Errorf("RestartCountOf(kubelet's annotation 3) = %d", got)
	}
	for in, want := range map[string]int32{"4": 4, "": 0, "x": 0, "99999999999": 0} {
		if got := RestartCountOf(map[string]string{AnnotationRestartCount: in}); got != want {
			t.Errorf("RestartCountOf(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestContainerHash: the hash changes with the spec and with nothing else.
func TestContainerHash(t *testing.T) {
	c := &v1.Container{Name: "app", Image: "busybox", Command: []string{"sleep", "3600"}}
	h := ContainerHash(c)
	if again := ContainerHash(c.DeepCopy()); again != h {
		t.Errorf("the same spec hashes to %s and %s", h, again)
	}
	c.Image = "busybox:1.36"
	if ContainerHash(c) == h {
		t.Error("a changed image keeps the hash")
	}
}

// TestRunHash: an instance of speclet's is compared by speclet's hash; one
// kubelet created by kubelet's (name and image), so that an unchanged spec
// keeps it and a changed image replaces it.
func TestRunHash(t *testing.T) {
	c := &v1.Container{Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "1"}}
	if got := RunHash(map[string]string{AnnotationContainerHash: "abc", KubeletContainerHash: KubeletHash(c)}, c); got != "abc" {
		t.Errorf("speclet's annotation present: RunHash = %q, want it", got)
	}
	if got := RunHash(map[string]string{KubeletContainerHash: KubeletHash(c)}, c); got != ContainerHash(c) {
		t.Errorf("kubelet's matching hash: RunHash = %q, want the spec's %q", got, ContainerHash(c))
	}
	other := c.DeepCopy()
	other.Image = "busybox:1.37"
	if got := RunHash(map[string]string{KubeletContainerHash: KubeletHash(other)}, c); got == ContainerHash(c) || got == "" {
		t.Errorf("kubelet's hash of another image: RunHash = %q, want a hash other than the spec's", got)
	}
	if got := RunHash(nil, c); got != "" {
		t.Errorf("no hash: RunHash = %q, want none", got)
	}
}

// TestKubeletHash: KubeletHash is what kubelet v1.34.4 wrote on its
// containers (io.kubernetes.container.hash), recorded from a real kubelet
// by test/conformance's TestSwapKubeletToSpeclet -conformance.record.
func TestKubeletHash(t *testing.T) {
	b, err := os.ReadFile("../staticuid/testdata/kubelet-v1.34.4.json")
	if err != nil {
		t.Fatal(err)
	}
	var pods []struct {
		Containers []struct{ Name, Image, Hash string } `json:"containers"`
	}
	if err := json.Unmarshal(b, &pods); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods {
		for _, c := range p.Containers {
			n++
			if got := KubeletHash(&v1.Container{Name: c.Name, Image: c.Image, Command: []string{"ignored"}}); got != c.Hash {
				t.Errorf("container %s image %s: KubeletHash %s, kubelet's %s", c.Name, c.Image, got, c.Hash)
			}
		}
	}
	if n == 0 {
		t.Fatal("no recorded containers")
	}
}

// TestKubeletHookAnnotations: the preStop hook and ports are written as
// kubelet v1.34.4 writes them (the JSON of the API types; these strings
// are what it wrote for such a container, engine/staticuid/testdata), within
// MaxHookAnnotationBytes; an orphan's stand-in has no hook (as kubelet's).
func TestKubeletHookAnnotations(t *testing.T) {
	const (
		kubeletPreStop = `{"exec":{"command":["sh","-c","echo bye \u003e /hook/ran"]}}`
		kubeletPorts   = `[{"name":"web","hostPort":18080,"containerPort":18080,"protocol":"TCP"}]`
	)
	c := &v1.Container{Name: "app", Image: "busybox",
		Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo bye > /hook/ran"}}}},
		Ports:     []v1.ContainerPort{{Name: "web", HostPort: 18080, ContainerPort: 18080, Protocol: v1.ProtocolTCP}}}
	a := KubeletAnnotations(&v1.Pod{}, c, 0)
	if a[KubeletPreStopHandler] != kubeletPreStop || a[KubeletContainerPorts] != kubeletPorts {
		t.Errorf("annotations\n%s\n%s\nwant kubelet's\n%s\n%s", a[KubeletPreStopHandler], a[KubeletContainerPorts], kubeletPreStop, kubeletPorts)
	}
	if a := KubeletAnnotations(&v1.Pod{}, &v1.Container{Name: "plain"}, 0); len(a) != 4 {
		t.Errorf("a container without hook and ports: annotations %v, want neither JSON one (as kubelet)", a)
	}
	// Too large for MaxHookAnnotationBytes: ports beyond the hook's share
	// are cut to the port an httpGet hook names; a hook too large is left
	// out, and so are the ports then.
	big := c.DeepCopy()
	big.Lifecycle.PreStop = &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/quit", Port: intstr.FromString("admin")}}
	for i := range 20 {
		big.Ports = append(big.Ports, v1.ContainerPort{Name: fmt.Sprintf("p%d", i), ContainerPort: int32(9000 + i), Protocol: v1.ProtocolTCP})
	}
	big.Ports = append(big.Ports, v1.ContainerPort{Name: "admin", ContainerPort: 8081, Protocol: v1.ProtocolTCP})
	a = KubeletAnnotations(&v1.Pod{}, big, 0)
	if want := `[{"name":"admin","containerPort":8081,"protocol":"TCP"}]`; a[KubeletContainerPorts] != want || a[KubeletPreStopHandler] == "" {
		t.Errorf("ports beyond the share: %q (hook %q), want only the hook's %s", a[KubeletContainerPorts], a[KubeletPreStopHandler], want)
	}
	big.Lifecycle.PreStop.HTTPGet.Path = "/" + strings.Repeat("x", MaxHookAnnotationBytes)
	if a := KubeletAnnotations(&v1.Pod{}, big, 0); a[KubeletPreStopHandler] != "" || a[KubeletContainerPorts] != "" {
		t.Errorf("a hook beyond the share: %q, %q; want neither", a[KubeletPreStopHandler], a[KubeletContainerPorts])
	}

	// An orphan is stopped without its hook, as kubelet stops one.
	pods := Group(nil, []*runtimeapi.Container{{Id: "k", Labels: map[string]string{KubeletPodUID: "k1", KubeletContainerName: "app"},
		Annotations: map[string]string{KubeletPreStopHandler: kubeletPreStop, KubeletContainerPorts: kubeletPorts}}})
	if o := Orphan(pods["k1"]); len(o.Spec.Containers) != 1 || o.Spec.Containers[0].Lifecycle != nil || o.Spec.Containers[0].Ports != nil {
		t.Errorf("orphan containers %+v, want app without hook or ports", o.Spec.Containers)
	}
}
