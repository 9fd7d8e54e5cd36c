package cgroups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemCgroups: Join makes the cgroup in every hierarchy and the
// hybrid unified mount and moves the process into each; Adopt moves the root's user-space processes of each
// hierarchy and leaves the kernel threads and the root itself alone.
func TestSystemCgroups(t *testing.T) {
	root := t.TempDir()
	mi := filepath.Join(t.TempDir(), "mountinfo")
	lines := []string{
		"31 30 0:27 / " + root + "/memory rw,relatime - cgroup cgroup rw,memory",
		"32 30 0:28 / " + root + "/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct",
		"34 30 0:30 / " + root + "/unified rw,relatime - cgroup2 cgroup2 rw",
	}
	if err := os.WriteFile(mi, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	proc := filepath.Join(root, "proc")
	// 10 and 12 are processes; 11 is a kernel thread (no executable).
	for _, pid := range []string{"10", "11", "12"} {
		os.MkdirAll(filepath.Join(proc, pid), 0o755)
	}
	os.Symlink("/bin/sh", filepath.Join(proc, "10", "exe"))
	os.Symlink("/bin/sh", filepath.Join(proc, "12", "exe"))
	// 12 is at the root of cpu only: memory and unified have it placed.
	for h, procs := range map[string]string{"memory": "10\n11\n", "cpu,cpuacct": "10\n11\n12\n", "unified": "10\n11\n"} {
		os.MkdirAll(filepath.Join(root, h), 0o755)
		if err := os.WriteFile(filepath.Join(root, h, "cgroup.procs"), []byte(procs), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := New(Options{Root: root, Mountinfo: mi, Proc: proc})
	if err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return string(b)
	}

	if err := m.Join("/kubelet", 4242); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"memory", "cpu,cpuacct", "unified"} {
		if got := read(h + "/kubelet/cgroup.procs"); got != "4242" {
			t.Errorf("%s/kubelet/cgroup.procs = %q, want 4242", h, got)
		}
	}

	// a file standing in for cgroup.procs keeps the last pid written
	n, err := m.Adopt("/system")
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("Adopt moved %d processes, want 2 (10 and 12; 11 is a kernel thread)", n)
	}
	for h, want := range map[string]string{"memory": "10", "cpu,cpuacct": "12", "unified": "10"} {
		if got := read(h + "/system/cgroup.procs"); got != want {
			t.Errorf("%s/system/cgroup.procs last written %q, want %q", h, got, want)
		}
	}
	for _, bad := range []string{"/", "system", "/a/../b"} {
		if _, err := m.Adopt(bad); err == nil {
			t.Errorf("Adopt(%q) accepted", bad)
		}
	}
}
