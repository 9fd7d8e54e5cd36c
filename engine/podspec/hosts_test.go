package podspec

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHostsMount: the kubelet-managed /etc/hosts, its content and when a
// container gets it.
func TestHostsMount(t *testing.T) {
	nodeHosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(nodeHosts, []byte("127.0.0.1 localhost\n192.0.2.1 node-a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const localhost = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	aliases := []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo.local", "bar.local"}}, {IP: "::2", Hostnames: []string{"v6.local"}}}
	for _, tc := range []struct {
		name   string
		spec   v1.PodSpec
		mounts []v1.VolumeMount
		podIPs []string
		want   string // "": no mount
	}{
		{name: "pod IP and name", podIPs: []string{"10.1.0.5"}, want: localhost + "10.1.0.5\tweb-0\n"},
		{name: "hostname and subdomain", spec: v1.PodSpec{Hostname: "h", Subdomain: "sub"}, podIPs: []string{"10.1.0.5", "fd00::5"},
			want: localhost + "10.1.0.5\th.sub.ns.svc.cluster.local\th\nfd00::5\th.sub.ns.svc.cluster.local\th\n"},
		{name: "hostAliases", spec: v1.PodSpec{HostAliases: aliases}, podIPs: []string{"10.1.0.5"},
			want: localhost + "10.1.0.5\tweb-0\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo.local\tbar.local\n::2\tv6.local\n"},
		{name: "host network: the node's file", spec: v1.PodSpec{HostNetwork: true, HostAliases: aliases[:1]}, podIPs: []string{"192.0.2.1"},
			want: "# Kubernetes-managed hosts file (host network).\n127.0.0.1 localhost\n192.0.2.1 node-a\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo.local\tbar.local\n"},
		{name: "the container mounts its own", mounts: []v1.VolumeMount{{Name: "v", MountPath: "/etc/hosts"}}, podIPs: []string{"10.1.0.5"}},
		{name: "no pod IP", podIPs: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := Node{RootDir: t.TempDir(), ClusterDomain: "cluster.local", HostsPath: nodeHosts}
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", UID: "u1"}, Spec: tc.spec}
			c := &v1.Container{Name: "c", VolumeMounts: tc.mounts}
			m, err := hostsMount(n, ContainerRequest{Pod: pod, Container: c, PodIPs: tc.podIPs})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if m != nil {
					t.Fatalf("mount %+v, want none", m)
				}
				return
			}
			if m == nil || m.ContainerPath != "/etc/hosts" || m.Readonly || m.HostPath != filepath.Join(n.RootDir, "pods", "u1", "etc-hosts") {
				t.Fatalf("mount %+v, want <root>/pods/u1/etc-hosts at /etc/hosts, writable", m)
			}
			got, err := os.ReadFile(m.HostPath)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("hosts file\n%q\nwant\n%q", got, tc.want)
			}
			if fi, _ := os.Stat(m.HostPath); fi.Mode().Perm() != 0o644 {
				t.Errorf("mode %v, want 0644", fi.Mode().Perm())
			}
		})
	}
}

// TestContainerGetsHostsMount: Container adds the hosts mount after the
// volume mounts.
func TestContainerGetsHostsMount(t *testing.T) {
	n := Node{RootDir: t.TempDir()}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u2"}}
	cc, err := Container(n, ContainerRequest{Pod: pod, Container: &v1.Container{Name: "c", Image: "busybox"}, PodIPs: []string{"10.1.0.9"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cc.Mounts) != 1 || cc.Mounts[0].ContainerPath != "/etc/hosts" {
		t.Fatalf("mounts %v, want /etc/hosts", cc.Mounts)
	}
}
