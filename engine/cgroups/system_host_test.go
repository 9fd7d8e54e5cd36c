package cgroups

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJoinHost moves a real process into a test-made system cgroup on the
// host's cgroup filesystems: /proc/<pid>/cgroup then names the cgroup in
// every controller hierarchy and, on a hybrid host, in the unified one (the
// line "0::"), where the kernel keeps its pressure files; Release moves it
// back and removes the cgroup. Adopt is not run here: it would move every
// process of the machine.
func TestJoinHost(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: the system cgroup test needs root (cgroups)")
		}
		t.Skip("the system cgroup test needs root (cgroups)")
	}
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	rel := fmt.Sprintf("/speclet-jointest-%d", os.Getpid())
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		for _, dir := range m.podDirs(rel) {
			for i := 0; i < 50; i++ {
				if err := os.Remove(dir); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	})
	if err := m.Join(rel, cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(cmd.Process.Pid), "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	unified := false
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 || strings.HasPrefix(f[1], "name=") {
			continue // a named hierarchy (name=systemd) is the init system's
		}
		if f[1] == "" {
			unified = true
		}
		if m.v2 || f[1] != "" || m.unified != "" {
			if f[2] != rel {
				t.Errorf("/proc/%d/cgroup %q: want the process in %s", cmd.Process.Pid, l, rel)
			}
		}
	}
	if (m.v2 || m.unified != "") && !unified {
		t.Errorf("/proc/%d/cgroup has no cgroup2 line:\n%s", cmd.Process.Pid, b)
	}

	// Release: the process back at the root of each hierarchy it was
	// moved in, the cgroup gone
	if err := m.Release(rel); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(filepath.Join("/proc", fmt.Sprint(cmd.Process.Pid), "cgroup"))
	if strings.Contains(string(b), rel) {
		t.Errorf("after Release /proc/%d/cgroup still names %s:\n%s", cmd.Process.Pid, rel, b)
	}
	for _, dir := range m.podDirs(rel) {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s still there after Release (%v)", dir, err)
		}
	}
}
