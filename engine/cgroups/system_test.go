package cgroups

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemCgroups: Join makes the cgroup in every hierarchy and the
// hybrid unified mount and moves the process into each; Adopt moves, into
// every hierarchy, the user-space processes at the root of the devices
// hierarchy (kubelet's test of "in the root cgroup") and leaves the kernel
// threads, pid 1 and the processes placed elsewhere alone; Where reads a
// process's cgroups and Put moves it back.
func TestSystemCgroups(t *testing.T) {
	root := t.TempDir()
	mi := filepath.Join(t.TempDir(), "mountinfo")
	lines := []string{
		"31 30 0:27 / " + root + "/memory rw,relatime - cgroup cgroup rw,memory",
		"32 30 0:28 / " + root + "/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct",
		"33 30 0:29 / " + root + "/devices rw,relatime - cgroup cgroup rw,devices",
		"34 30 0:30 / " + root + "/unified rw,relatime - cgroup2 cgroup2 rw",
	}
	if err := os.WriteFile(mi, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	proc := filepath.Join(root, "proc")
	// 1 is init, 10, 12 and 13 are processes, 11 is a kernel thread (no
	// executable); 12 is in a cgroup of its own in memory, 13 in devices.
	for _, pid := range []string{"1", "10", "11", "12", "13"} {
		os.MkdirAll(filepath.Join(proc, pid), 0o755)
		if pid != "11" {
			os.Symlink("/bin/sh", filepath.Join(proc, pid, "exe"))
		}
	}
	for h, procs := range map[string]string{"memory": "1\n10\n11\n13\n", "cpu,cpuacct": "1\n10\n11\n12\n13\n", "devices": "1\n10\n11\n12\n", "unified": "1\n10\n11\n12\n13\n"} {
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
	hiers := []string{"memory", "cpu,cpuacct", "devices", "unified"}

	if err := m.Join("/kubelet", 4242); err != nil {
		t.Fatal(err)
	}
	for _, h := range hiers {
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
		t.Errorf("Adopt moved %d processes, want 2 (10 and 12)", n)
	}
	for _, h := range hiers {
		if got := read(h + "/system/cgroup.procs"); got != "12" {
			t.Errorf("%s/system/cgroup.procs last written %q, want 12 (10, then 12, in every hierarchy)", h, got)
		}
	}
	for _, bad := range []string{"/", "system", "/a/../b"} {
		if _, err := m.Adopt(bad); err == nil {
			t.Errorf("Adopt(%q) accepted", bad)
		}
	}

	os.WriteFile(filepath.Join(proc, "12", "cgroup"), []byte("12:devices:/\n5:memory:/job/7\n3:cpu,cpuacct:/\n1:name=systemd:/\n0::/job/7\n"), 0o644)
	where, err := m.Where(12)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{root + "/devices": "/", root + "/memory": "/job/7", root + "/cpu,cpuacct": "/", root + "/unified": "/job/7"}
	if fmt.Sprint(where) != fmt.Sprint(want) {
		t.Errorf("Where(12) = %v, want %v", where, want)
	}
	os.MkdirAll(filepath.Join(root, "memory/job/7"), 0o755)
	os.MkdirAll(filepath.Join(root, "unified/job/7"), 0o755)
	if err := m.Put(12, where); err != nil {
		t.Fatal(err)
	}
	if got := read("memory/job/7/cgroup.procs"); got != "12" {
		t.Errorf("after Put memory/job/7/cgroup.procs = %q, want 12", got)
	}
}
