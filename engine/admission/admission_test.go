package admission

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/engine/podspec"
)

// TestAdmit is the admission decision as a table: each case a pod, what
// runs beside it, and the reason and message kubelet gives (or admission).
func TestAdmit(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"zone": "z1", "disk": "ssd"}}}
	ports := func(ps ...v1.ContainerPort) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Ports: ps}}}}
	}
	hp := func(port int32, proto v1.Protocol, ip string) v1.ContainerPort {
		return v1.ContainerPort{ContainerPort: port, HostPort: port, Protocol: proto, HostIP: ip}
	}
	affinity := func(op v1.NodeSelectorOperator, key string, vals ...string) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
				MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: vals}},
			}}},
		}}}}
	}
	sidecar := &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "s", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways), Ports: []v1.ContainerPort{hp(9000, "", "")}}}}}
	plainInit := &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i", Ports: []v1.ContainerPort{hp(9000, "", "")}}}}}
	classes := func(name string) (string, error) {
		switch name {
		case "fast":
			return "runc", nil
		case "broken":
			return "", errors.New("cache not synced")
		}
		return "", apierrors.NewNotFound(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}, name)
	}
	const (
		msgPorts    = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
		msgAffinity = "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
		msgName     = "Predicate NodeName failed: node(s) didn't match the requested node name"
	)
	strict := &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{SupplementalGroupsPolicy: ptr.To(v1.SupplementalGroupsPolicyStrict)}}}
	sysctls, err := podspec.NewSysctls("6.1.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		pod         *v1.Pod
		active      []*v1.Pod
		alloc       v1.ResourceList
		noClasses   bool
		features    *podspec.RuntimeFeatures
		reason, msg string
		handler     string
	}{
		{name: "nothing asked", pod: &v1.Pod{}},
		{name: "host port free", pod: ports(hp(8080, "", "")), active: []*v1.Pod{ports(hp(8081, "", ""))}},
		{name: "host port taken", pod: ports(hp(8080, "", "")), active: []*v1.Pod{ports(hp(8080, v1.ProtocolTCP, ""))}, reason: "NodePorts", msg: msgPorts},
		{name: "other protocol", pod: ports(hp(8080, v1.ProtocolUDP, "")), active: []*v1.Pod{ports(hp(8080, "", ""))}},
		{name: "one address against all addresses", pod: ports(hp(8080, "", "127.0.0.1")), active: []*v1.Pod{ports(hp(8080, "", ""))}, reason: "NodePorts", msg: msgPorts},
		{name: "all addresses against one address", pod: ports(hp(8080, "", "")), active: []*v1.Pod{ports(hp(8080, "", "127.0.0.2"))}, reason: "NodePorts", msg: msgPorts},
		{name: "two addresses", pod: ports(hp(8080, "", "127.0.0.1")), active: []*v1.Pod{ports(hp(8080, "", "127.0.0.2"))}},
		{name: "container port only", pod: ports(v1.ContainerPort{ContainerPort: 8080}), active: []*v1.Pod{ports(hp(8080, "", ""))}},
		{name: "sidecar holds its port", pod: ports(hp(9000, "", "")), active: []*v1.Pod{sidecar}, reason: "NodePorts", msg: msgPorts},
		{name: "init container does not hold its port", pod: ports(hp(9000, "", "")), active: []*v1.Pod{plainInit}},
		{name: "nodeSelector matches", pod: &v1.Pod{Spec: v1.PodSpec{NodeSelector: map[string]string{"disk": "ssd"}}}},
		{name: "nodeSelector does not match", pod: &v1.Pod{Spec: v1.PodSpec{NodeSelector: map[string]string{"disk": "hdd"}}}, reason: "NodeAffinity", msg: msgAffinity},
		{name: "affinity In matches", pod: affinity(v1.NodeSelectorOpIn, "zone", "z0", "z1")},
		{name: "affinity In does not match", pod: affinity(v1.NodeSelectorOpIn, "zone", "z2"), reason: "NodeAffinity", msg: msgAffinity},
		{name: "affinity DoesNotExist", pod: affinity(v1.NodeSelectorOpDoesNotExist, "disk"), reason: "NodeAffinity", msg: msgAffinity},
		{name: "nodeName is this node", pod: &v1.Pod{Spec: v1.PodSpec{NodeName: "node-a"}}},
		{name: "nodeName is another node", pod: &v1.Pod{Spec: v1.PodSpec{NodeName: "node-b"}}, reason: "NodeName", msg: msgName},
		{name: "resources come first", pod: requests("2", &v1.Pod{Spec: v1.PodSpec{NodeName: "node-b"}}), alloc: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
			reason: "OutOfcpu", msg: "Node didn't have enough resource: cpu, requested: 2000, used: 0, capacity: 1000"},
		{name: "affinity before nodeName before ports", pod: &v1.Pod{Spec: v1.PodSpec{NodeName: "node-b", NodeSelector: map[string]string{"disk": "hdd"}}}, reason: "NodeAffinity", msg: msgAffinity},
		{name: "known runtime class", pod: &v1.Pod{Spec: v1.PodSpec{RuntimeClassName: ptr.To("fast")}}, handler: "runc"},
		{name: "empty runtime class", pod: &v1.Pod{Spec: v1.PodSpec{RuntimeClassName: ptr.To("")}}},
		{name: "unknown runtime class", pod: &v1.Pod{Spec: v1.PodSpec{RuntimeClassName: ptr.To("gvisor")}},
			reason: "RuntimeClassNotFound", msg: `runtimeclasses.node.k8s.io "gvisor" not found`},
		{name: "runtime class lookup fails", pod: &v1.Pod{Spec: v1.PodSpec{RuntimeClassName: ptr.To("broken")}},
			reason: "UnexpectedAdmissionError", msg: `Unexpected error while looking up RuntimeClass "broken": cache not synced`},
		{name: "runtime class without API", pod: &v1.Pod{Spec: v1.PodSpec{RuntimeClassName: ptr.To("fast")}}, noClasses: true,
			reason: "RuntimeClassNotFound", msg: `RuntimeClass "fast" cannot be resolved: speclet runs without --kubeconfig (no RuntimeClass API)`},
		{name: "os field linux", pod: &v1.Pod{Spec: v1.PodSpec{OS: &v1.PodOS{Name: v1.Linux}}}},
		{name: "os field windows", pod: &v1.Pod{Spec: v1.PodSpec{OS: &v1.PodOS{Name: v1.Windows}}},
			reason: "PodOSNotSupported", msg: "Failed to admit pod as the OS field doesn't match node OS"},
		{name: "os label windows", pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelOSStable: "windows"}}},
			reason: "PodOSSelectorNodeLabelDoesNotMatch", msg: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"},
		{name: "unsupported field before resources", pod: requests("2", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c",
			VolumeDevices: []v1.VolumeDevice{{Name: "blk", DevicePath: "/dev/xvda"}}}}}}), alloc: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
			reason: "FieldNotSupported", msg: "Pod uses what this node does not support: spec.containers[0].volumeDevices: block volumes are not supported"},
		{name: "sysctl not allowlisted", pod: &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.msgmax", Value: "1"}}}}},
			reason: "SysctlForbidden", msg: `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{name: "supplementalGroupsPolicy Strict, runtime without it", pod: strict, features: &podspec.RuntimeFeatures{NoFeatures: true},
			reason: "SupplementalGroupsPolicyNotSupported", msg: "SupplementalGroupsPolicy=Strict is not supported in this node"},
		{name: "supplementalGroupsPolicy Strict, features not read yet", pod: strict,
			reason: "SupplementalGroupsPolicyNotSupported", msg: "SupplementalGroupsPolicy=Strict is not supported in this node"},
		{name: "supplementalGroupsPolicy Strict, runtime with it", pod: strict, features: &podspec.RuntimeFeatures{SupplementalGroupsPolicy: true}},
		{name: "supplementalGroupsPolicy Merge, runtime without it", pod: &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{
			SupplementalGroupsPolicy: ptr.To(v1.SupplementalGroupsPolicyMerge)}}}},
		{name: "OS before supplementalGroupsPolicy", pod: &v1.Pod{Spec: v1.PodSpec{OS: &v1.PodOS{Name: v1.Windows}, SecurityContext: strict.Spec.SecurityContext}},
			reason: "PodOSNotSupported", msg: "Failed to admit pod as the OS field doesn't match node OS"},
		{name: "safe sysctl", pod: &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Node: node, Allocatable: tc.alloc, Active: func() []*v1.Pod { return tc.active }, RuntimeClasses: classes, Sysctls: sysctls, Features: tc.features}
			if tc.noClasses {
				in.RuntimeClasses = nil
			}
			h, r := Admit(tc.pod, in)
			switch {
			case tc.reason == "" && r != nil:
				t.Fatalf("refused (%s: %s), want admitted", r.Reason, r.Message)
			case tc.reason != "" && r == nil:
				t.Fatalf("admitted, want refused with %s", tc.reason)
			case r != nil && (r.Reason != tc.reason || r.Message != tc.msg):
				t.Fatalf("refused with %s: %q\nwant %s: %q", r.Reason, r.Message, tc.reason, tc.msg)
			}
			if h != tc.handler {
				t.Errorf("handler %q, want %q", h, tc.handler)
			}
		})
	}
}

// TestAdmitListsActivePodsOnce: the active pods are listed only when a
// check reads them (a pods capacity, a request against allocatable, a host
// port), and at most once per decision, so admitting a burst of pods that
// ask for nothing does not walk every worker for each.
func TestAdmitListsActivePodsOnce(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cpu := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}
	withPort := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Ports: []v1.ContainerPort{{HostPort: 8080}}}}}}
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		alloc   v1.ResourceList
		maxPods int
		lists   int
	}{
		{name: "asks for nothing", pod: &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}, alloc: cpu},
		{name: "requests cpu", pod: requests("1", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}), alloc: cpu, lists: 1},
		{name: "requests cpu, no allocatable", pod: requests("1", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}})},
		{name: "host port", pod: withPort, lists: 1},
		{name: "pods capacity, requests and host port", pod: requests("1", withPort.DeepCopy()), alloc: cpu, maxPods: 10, lists: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			in := Input{Node: node, Allocatable: tc.alloc, MaxPods: tc.maxPods, Active: func() []*v1.Pod { n++; return nil }}
			if _, r := Admit(tc.pod, in); r != nil {
				t.Fatalf("refused (%s: %s), want admitted", r.Reason, r.Message)
			}
			if n != tc.lists {
				t.Errorf("active pods listed %d times, want %d", n, tc.lists)
			}
		})
	}
}

// requests gives p's first container (made if it has none) a CPU request.
func requests(cpu string, p *v1.Pod) *v1.Pod {
	if len(p.Spec.Containers) == 0 {
		p.Spec.Containers = []v1.Container{{Name: "c"}}
	}
	p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	return p
}
