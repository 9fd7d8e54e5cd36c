package podspec

import (
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/engine/volume"
)

// TestUserNamespace: the pod's user namespace option reaches the sandbox
// and the container; a namespace of the pod's own maps the IDs of every
// mount of the container (its volume, /etc/hosts, the termination log),
// the node's namespace none.
func TestUserNamespace(t *testing.T) {
	root := t.TempDir()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"},
		Spec: v1.PodSpec{HostUsers: ptr.To(false), Volumes: []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
			Containers: []v1.Container{{Name: "c", Image: "busybox", TerminationMessagePath: "/dev/termination-log",
				VolumeMounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/data"}}}}}}
	if err := os.MkdirAll(volume.HostPath(root, pod, &pod.Spec.Volumes[0]), 0o755); err != nil {
		t.Fatal(err)
	}
	ids := []*runtimeapi.IDMapping{{HostId: 196608, ContainerId: 0, Length: 65536}}
	own := &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: ids, Gids: ids}
	node := &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}
	n := Node{RootDir: root, Name: "n"}
	for _, tc := range []struct {
		name   string
		u      *runtimeapi.UserNamespace
		mapped bool
	}{{"own", own, true}, {"node", node, false}, {"none sent", nil, false}} {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := Sandbox(n, SandboxRequest{Pod: pod, UserNamespace: tc.u})
			if err != nil {
				t.Fatal(err)
			}
			if got := sb.Linux.SecurityContext.NamespaceOptions.UsernsOptions; got != tc.u {
				t.Errorf("sandbox userns %v, want %v", got, tc.u)
			}
			cc, err := Container(n, ContainerRequest{Pod: pod, Container: &pod.Spec.Containers[0], UserNamespace: tc.u, PodIPs: []string{"10.0.0.2"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := cc.Linux.SecurityContext.NamespaceOptions.UsernsOptions; got != tc.u {
				t.Errorf("container userns %v, want %v", got, tc.u)
			}
			paths := map[string]bool{}
			for _, m := range cc.Mounts {
				paths[m.ContainerPath] = true
				if mapped := len(m.UidMappings) == 1 && m.UidMappings[0] == ids[0] && len(m.GidMappings) == 1 && m.GidMappings[0] == ids[0]; mapped != tc.mapped {
					t.Errorf("mount %s: uid mappings %v gid mappings %v, want mapped %v", m.ContainerPath, m.UidMappings, m.GidMappings, tc.mapped)
				}
			}
			for _, p := range []string{"/data", "/etc/hosts", "/dev/termination-log"} {
				if !paths[p] {
					t.Errorf("no mount at %s; mounts %v", p, cc.Mounts)
				}
			}
		})
	}
}
