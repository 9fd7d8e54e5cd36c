package cgroups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/speclet/speclet/engine/resources"
)

// TestV1Hierarchies: the controller hierarchies under the root are found in
// mountinfo; named hierarchies (name=systemd), the cgroup2 mount and other
// filesystems are not.
func TestV1Hierarchies(t *testing.T) {
	mi := filepath.Join(t.TempDir(), "mountinfo")
	lines := []string{
		"30 25 0:26 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
		"31 30 0:27 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu",
		"32 30 0:28 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
		"33 30 0:29 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd",
		"34 30 0:30 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
		"35 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct",
		"36 25 0:32 / /other/memory rw,relatime - cgroup cgroup rw,memory",
	}
	if err := os.WriteFile(mi, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Root: "/sys/fs/cgroup", Mountinfo: mi})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, h := range m.hiers {
		dirs = append(dirs, h.dir)
	}
	if got := strings.Join(dirs, " "); got != "/sys/fs/cgroup/cpu /sys/fs/cgroup/cpu,cpuacct /sys/fs/cgroup/memory" {
		t.Errorf("hierarchies %q", got)
	}
	if m.V2() || m.Dir("memory", "/kubepods") != "/sys/fs/cgroup/memory/kubepods" || m.Dir("hugetlb", "/kubepods") != "" {
		t.Errorf("v2 %v, memory dir %q, hugetlb dir %q", m.V2(), m.Dir("memory", "/kubepods"), m.Dir("hugetlb", "/kubepods"))
	}
	for _, bad := range []string{"node-a", "/node-a/", "/a/../b"} {
		if _, err := New(Options{Root: "/sys/fs/cgroup", Mountinfo: mi, Parent: bad}); err == nil {
			t.Errorf("parent %q accepted", bad)
		}
	}
}

// TestParent: the pod cgroup sits under its QoS class's parent, under
// --cgroup-root when one is given.
func TestParent(t *testing.T) {
	m := &Manager{}
	under := &Manager{parent: "/node-a"}
	if got := under.PodsCgroup(); got != "/node-a/kubepods" {
		t.Errorf("pods cgroup under /node-a: %q", got)
	}
	for _, tc := range []struct {
		req, lim string
		want     string
	}{
		{"cpu=1,memory=1Gi", "cpu=1,memory=1Gi", "/kubepods/podu"},
		{"memory=1Gi", "", "/kubepods/burstable/podu"},
		{"", "", "/kubepods/besteffort/podu"},
	} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}, Spec: v1.PodSpec{Containers: []v1.Container{{
			Resources: v1.ResourceRequirements{Requests: resources.MustList(tc.req), Limits: resources.MustList(tc.lim)}}}}}
		if got := under.Parent(pod); got != "/node-a"+tc.want {
			t.Errorf("under /node-a: requests %q limits %q: parent %q, want %q", tc.req, tc.lim, got, "/node-a"+tc.want)
		}
		if got := m.Parent(pod); got != tc.want {
			t.Errorf("requests %q limits %q: parent %q, want %q", tc.req, tc.lim, got, tc.want)
		}
	}
}
