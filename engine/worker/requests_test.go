package worker

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/internal/suite"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/runtimepods"
)

// TestContainerConfig: what the runtime is asked to create for a container
// of a hostNetwork pod: speclet's labels and annotations, the log path under
// the pod's log directory, expanded args, the node's network namespace.
func TestContainerConfig(t *testing.T) {
	pod := suite.Pod(7)
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "GREETING", Value: "hello"}, {Name: "MSG", Value: "$(GREETING) world"}}
	c.Args = []string{"echo", "$(MSG)"}
	cfg, err := containerConfig(podspec.Node{RootDir: "/root"}, pod, c, 3, "sha256:abc", false, podspec.ImageUser{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Args[1]; got != "hello world" {
		t.Errorf("args[1] = %q, want %q", got, "hello world")
	}
	if cfg.LogPath != "app/3.log" {
		t.Errorf("log path = %q, want app/3.log", cfg.LogPath)
	}
	if cfg.Labels[runtimepods.LabelPodUID] != string(pod.UID) || cfg.Labels[runtimepods.LabelContainerName] != "app" || cfg.Labels[runtimepods.LabelPodName] != pod.Name {
		t.Errorf("labels = %v, want pod uid, name and container name", cfg.Labels)
	}
	if cfg.Annotations[runtimepods.AnnotationRestartCount] != "3" || cfg.Annotations[runtimepods.AnnotationContainerHash] != runtimepods.ContainerHash(c) {
		t.Errorf("annotations = %v, want restart count 3 and the spec hash", cfg.Annotations)
	}
	if cfg.Metadata.Attempt != 3 || cfg.Image.Image != "sha256:abc" {
		t.Errorf("attempt %d image %q, want attempt 3 and the pulled image reference", cfg.Metadata.Attempt, cfg.Image.Image)
	}
	if ns := cfg.Linux.SecurityContext.NamespaceOptions.Network.String(); ns != "NODE" {
		t.Errorf("network namespace = %s, want NODE for a hostNetwork pod", ns)
	}
	sb, err := sandboxConfig(podspec.Node{RootDir: "/root"}, pod, 0, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sb.LogDirectory != "/root/logs/default_"+pod.Name+"_"+string(pod.UID) {
		t.Errorf("sandbox log directory = %q", sb.LogDirectory)
	}
	if sb.Hostname != "" {
		t.Errorf("hostNetwork sandbox hostname = %q, want none (the node's)", sb.Hostname)
	}
}

// TestRuntimeRecordBounds checks the bounds documented in requests.go: the
// runtime's list records of a pod with the largest names, UID, image and
// annotations a valid manifest may have stay within MaxSandboxRecordBytes
// and MaxContainerRecordBytes.
func TestRuntimeRecordBounds(t *testing.T) {
	ann := map[string]string{}
	for i := 0; len(ann) < 64; i++ {
		ann[fmt.Sprintf("example.com/key-%d", i)] = strings.Repeat("v", 4000) // 256 KiB in all
	}
	long := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	grace := int64(30)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: long('n', 253), Namespace: long('s', 63), UID: types.UID(long('u', 63)), Annotations: ann},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{{
			Name: long('c', 63), Image: long('i', config.MaxImageLength)}}},
	}
	// a preStop hook and ports that nearly fill the JSON annotations' share
	// (runtimepods.MaxHookAnnotationBytes), then ports that do not fit
	// beside it (so the hook's named port is written alone)
	ctr := &pod.Spec.Containers[0]
	named := v1.ContainerPort{Name: long('n', 15), HostPort: 65535, ContainerPort: 65535, Protocol: v1.ProtocolSCTP, HostIP: "255.255.255.255"}
	hook := &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString(named.Name), Scheme: v1.URISchemeHTTPS}}
	hb, _ := json.Marshal(hook)
	pb, _ := json.Marshal([]v1.ContainerPort{named})
	hook.HTTPGet.Path = long('p', runtimepods.MaxHookAnnotationBytes-len(hb)-len(pb)-len(`,"path":""`))
	ctr.Lifecycle = &v1.Lifecycle{PreStop: hook}
	for i := range 64 {
		name := fmt.Sprintf("%s%02d", long('n', 13), i)
		p := named
		if i < 63 {
			p.Name = name
		}
		ctr.Ports = append(ctr.Ports, p)
	}
	sc, err := sandboxConfig(podspec.Node{RootDir: t.TempDir()}, pod, 99, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	sb := &runtimeapi.PodSandbox{Id: long('a', 64), Metadata: sc.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		CreatedAt: math.MaxInt64, Labels: sc.Labels, Annotations: sc.Annotations, RuntimeHandler: "runc"}
	if n := proto.Size(&runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{sb}}); n > MaxSandboxRecordBytes {
		t.Errorf("sandbox record: %d bytes, bound %d", n, MaxSandboxRecordBytes)
	} else {
		t.Logf("sandbox record: %d bytes (bound %d)", n, MaxSandboxRecordBytes)
	}
	cc, err := containerConfig(podspec.Node{RootDir: t.TempDir()}, pod, &pod.Spec.Containers[0], math.MaxInt32, "sha256:"+long('f', 64), true, podspec.ImageUser{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{runtimepods.KubeletPreStopHandler, runtimepods.KubeletContainerPorts} {
		if cc.Annotations[key] == "" {
			t.Errorf("no %s annotation: the bound is checked without it", key)
		}
	}
	if n := len(cc.Annotations[runtimepods.KubeletPreStopHandler]) + len(cc.Annotations[runtimepods.KubeletContainerPorts]); n != runtimepods.MaxHookAnnotationBytes {
		t.Errorf("hook and ports annotations: %d bytes, want the whole %d", n, runtimepods.MaxHookAnnotationBytes)
	}
	c := &runtimeapi.Container{Id: long('b', 64), PodSandboxId: long('a', 64), Metadata: cc.Metadata,
		Image:    &runtimeapi.ImageSpec{Image: cc.Image.Image, UserSpecifiedImage: pod.Spec.Containers[0].Image},
		ImageRef: "sha256:" + long('f', 64), ImageId: "sha256:" + long('f', 64), State: runtimeapi.ContainerState_CONTAINER_EXITED,
		CreatedAt: math.MaxInt64, Labels: cc.Labels, Annotations: cc.Annotations}
	if n := proto.Size(&runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{c}}); n > MaxContainerRecordBytes {
		t.Errorf("container record: %d bytes, bound %d", n, MaxContainerRecordBytes)
	} else {
		t.Logf("container record: %d bytes (bound %d)", n, MaxContainerRecordBytes)
	}
	// The documented totals: 250 pods' sandboxes fit one message, and so
	// do one pod's containers (ListContainers is split by sandbox).
	if total := 250 * 2 * MaxSandboxRecordBytes; total > cri.MaxMsgSize {
		t.Errorf("250 pods: %d bytes of sandbox records, over the %d message limit", total, cri.MaxMsgSize)
	}
	if total := config.MaxContainers * 2 * MaxContainerRecordBytes; total > cri.MaxMsgSize {
		t.Errorf("one pod of %d containers: %d bytes of container records, over the %d message limit", config.MaxContainers, total, cri.MaxMsgSize)
	}
}
