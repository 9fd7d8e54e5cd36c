package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

// TestNamespaces: the sandbox and each container get the same namespace
// options from the pod's hostNetwork, hostPID, hostIPC and
// shareProcessNamespace.
func TestNamespaces(t *testing.T) {
	const (
		pod  = runtimeapi.NamespaceMode_POD
		ctr  = runtimeapi.NamespaceMode_CONTAINER
		node = runtimeapi.NamespaceMode_NODE
	)
	for _, tc := range []struct {
		name          string
		spec          v1.PodSpec
		net, pid, ipc runtimeapi.NamespaceMode
	}{
		{"default", v1.PodSpec{}, pod, ctr, pod},
		{"hostNetwork", v1.PodSpec{HostNetwork: true}, node, ctr, pod},
		{"hostPID", v1.PodSpec{HostPID: true}, pod, node, pod},
		{"hostIPC", v1.PodSpec{HostIPC: true}, pod, ctr, node},
		{"shareProcessNamespace", v1.PodSpec{ShareProcessNamespace: ptr.To(true)}, pod, pod, pod},
		{"hostPID wins over sharing", v1.PodSpec{HostPID: true, ShareProcessNamespace: ptr.To(true)}, pod, node, pod},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1.Pod{Spec: tc.spec}
			for what, ns := range map[string]*runtimeapi.NamespaceOption{"sandbox": sandboxNamespaces(p), "container": containerNamespaces(p)} {
				if ns.Network != tc.net || ns.Pid != tc.pid || ns.Ipc != tc.ipc {
					t.Errorf("%s: network %s pid %s ipc %s, want %s %s %s", what, ns.Network, ns.Pid, ns.Ipc, tc.net, tc.pid, tc.ipc)
				}
			}
		})
	}
}
