package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/resources"
)

// TestV1Hierarchies: the controller hierarchies under the root are found in
// mountinfo; named hierarchies (name=systemd), the cgroup2 mount (kept
// apart: the unified mount of a hybrid host) and other filesystems are not.
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
	if m.unified != "/sys/fs/cgroup/unified" {
		t.Errorf("unified mount %q, want /sys/fs/cgroup/unified", m.unified)
	}
	if m.V2() || m.Dir("memory", "/kubepods") != "/sys/fs/cgroup/memory/kubepods" || m.Dir("hugetlb", "/kubepods") != "" {
		t.Errorf("v2 %v, memory dir %q, hugetlb dir %q", m.V2(), m.Dir("memory", "/kubepods"), m.Dir("hugetlb", "/kubepods"))
	}
	if got := m.Dir("", "/kubepods"); got != "/sys/fs/cgroup/unified/kubepods" {
		t.Errorf("cgroup2 dir of a hybrid host %q, want /sys/fs/cgroup/unified/kubepods", got)
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

// TestHybridUnified: on a hybrid host (v1 controllers beside a cgroup2 mount
// without controllers) runc also makes each container's cgroup, parents
// included, in the unified mount and removes only its own. Pods lists a pod
// cgroup found only there, and Remove removes the pod's directory there too.
func TestHybridUnified(t *testing.T) {
	root := t.TempDir()
	mi := filepath.Join(t.TempDir(), "mountinfo")
	lines := []string{
		"31 30 0:27 / " + root + "/memory rw,relatime - cgroup cgroup rw,memory",
		"34 30 0:30 / " + root + "/unified rw,relatime - cgroup2 cgroup2 rw",
	}
	if err := os.WriteFile(mi, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Root: root, Mountinfo: mi})
	if err != nil {
		t.Fatal(err)
	}
	if m.V2() || len(m.hiers) != 1 || m.unified != root+"/unified" {
		t.Fatalf("v2 %v, hierarchies %v, unified %q", m.V2(), m.hiers, m.unified)
	}
	// Pod a: runc's leftovers in both; pod b: only in the unified mount
	// (its v1 directories removed by an earlier speclet).
	old := time.Now().Add(-2 * settle)
	for _, d := range []string{
		"memory/kubepods/besteffort/poda/ctr", "unified/kubepods/besteffort/poda/ctr",
		"unified/kubepods/besteffort/podb/ctr",
	} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		for p := filepath.Join(root, d); p != root; p = filepath.Dir(p) {
			os.Chtimes(p, old, old)
		}
	}
	skipped, err := m.Pods(func(uid types.UID) bool { return uid == "a" })
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(skipped) != "[b]" {
		t.Errorf("Pods(skip a) = %v, want [b]", skipped)
	}
	uids, err := m.Pods(nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(uids) != "[a b]" {
		t.Errorf("Pods() = %v, want [a b]", uids)
	}
	for _, uid := range uids {
		if err := m.Remove(uid); err != nil {
			t.Errorf("Remove(%s): %v", uid, err)
		}
	}
	for _, d := range []string{"memory/kubepods/besteffort/poda", "unified/kubepods/besteffort/poda", "unified/kubepods/besteffort/podb"} {
		if _, err := os.Stat(filepath.Join(root, d)); !os.IsNotExist(err) {
			t.Errorf("%s still there after Remove (%v)", d, err)
		}
	}
}
