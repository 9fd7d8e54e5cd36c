package nodestats

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMeasureFakeHost reads a made-up /proc and cgroup v1 tree: memory
// available is MemTotal less the root cgroup's working set, PIDs are the
// smaller kernel limit less the processes, nodefs is the statfs of a
// directory.
func TestMeasureFakeHost(t *testing.T) {
	dir := t.TempDir()
	proc, cg := filepath.Join(dir, "proc"), filepath.Join(dir, "cgroup")
	write(t, filepath.Join(proc, "meminfo"), "MemTotal:        1000 kB\nMemFree:          100 kB\n")
	write(t, filepath.Join(proc, "sys/kernel/pid_max"), "4096\n")
	write(t, filepath.Join(proc, "sys/kernel/threads-max"), "1000\n")
	for _, p := range []string{"1", "22", "333"} {
		if err := os.MkdirAll(filepath.Join(proc, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(cg, "memory/memory.usage_in_bytes"), "512000\n")
	write(t, filepath.Join(cg, "memory/memory.stat"), "cache 1\ntotal_inactive_file 102400\n")
	obs, err := Host{Proc: proc, CgroupRoot: cg}.Measure(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if m := obs["memory.available"]; m.Capacity != 1024000 || m.Available != 1024000-(512000-102400) {
		t.Errorf("memory.available = %+v, want capacity 1024000, available %d", m, 1024000-(512000-102400))
	}
	if p := obs["pid.available"]; p.Capacity != 1000 || p.Available != 997 {
		t.Errorf("pid.available = %+v, want 997 of 1000", p)
	}
	if n := obs["nodefs.available"]; n.Capacity <= 0 || n.Available <= 0 || n.Available > n.Capacity {
		t.Errorf("nodefs.available = %+v", n)
	}
	if _, ok := obs["imagefs.available"]; ok {
		t.Error("imagefs.available measured without an image filesystem")
	}
	if _, err := (Host{Proc: filepath.Join(dir, "none"), CgroupRoot: cg}).Measure(dir, ""); err == nil {
		t.Error("no error without /proc/meminfo")
	}
}

// TestMeasureThisHost: the real host gives every signal a capacity.
func TestMeasureThisHost(t *testing.T) {
	obs, err := Host{}.Measure(t.TempDir(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"memory.available", "nodefs.available", "nodefs.inodesFree", "imagefs.available", "pid.available"} {
		if o := obs[s]; o.Capacity <= 0 || o.Available < 0 || o.Available > o.Capacity {
			t.Errorf("%s = %+v", s, o)
		}
	}
}

// TestAllocatableMemory: allocatableMemory.available is the pods cgroup's
// limit less its working set, on cgroup v1 and v2, and absent while the
// cgroup has no limit.
func TestAllocatableMemory(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"v1 limited", map[string]string{
			"memory.limit_in_bytes": "419430400\n", "memory.usage_in_bytes": "350000000\n",
			"memory.stat": "cache 5\ninactive_file 1\ntotal_inactive_file 20000000\n"},
			"available=89430400 capacity=419430400"},
		{"v1 unlimited", map[string]string{
			"memory.limit_in_bytes": "9223372036854771712\n", "memory.usage_in_bytes": "1\n", "memory.stat": ""},
			"absent"},
		{"v2 limited", map[string]string{
			"memory.max": "419430400\n", "memory.current": "400000000\n", "memory.stat": "anon 1\ninactive_file 0\n"},
			"available=19430400 capacity=419430400"},
		{"v2 max", map[string]string{"memory.max": "max\n", "memory.current": "1\n", "memory.stat": ""}, "absent"},
		{"over the limit", map[string]string{
			"memory.max": "100\n", "memory.current": "200\n", "memory.stat": "inactive_file 0\n"},
			"available=0 capacity=100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			pods := filepath.Join(dir, "kubepods")
			for f, c := range tt.files {
				write(t, filepath.Join(pods, f), c)
			}
			obs, err := Host{Pods: pods}.Measure(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			got := "absent"
			if o, ok := obs["allocatableMemory.available"]; ok {
				got = fmt.Sprintf("available=%d capacity=%d", o.Available, o.Capacity)
			}
			if got != tt.want {
				t.Errorf("allocatableMemory.available: %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := (Host{Pods: filepath.Join(t.TempDir(), "missing")}).Measure(t.TempDir(), ""); err == nil {
		t.Error("no error for a pods cgroup that cannot be read")
	}
}
