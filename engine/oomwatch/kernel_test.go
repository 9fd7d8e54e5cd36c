package oomwatch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestKernelMemcgKill makes a real OOM kill and reads it from /dev/kmsg: a
// process in a test-made memory cgroup limited to 16 MiB (not a pod's)
// grows until the kernel kills it. The kill enforces the test cgroup's
// limit, so the kernel names that cgroup (oom_memcg) and, by kubelet's
// rule, it is no system OOM: no SystemOOM. A system-wide OOM (the only
// kind kubelet reports) is not made here: it would let the kernel kill
// any process of the machine.
func TestKernelMemcgKill(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: the kernel OOM test needs root (a memory cgroup and /dev/kmsg)")
		}
		t.Skip("the kernel OOM test needs root (a memory cgroup and /dev/kmsg)")
	}
	name := fmt.Sprintf("speclet-oomtest-%d", os.Getpid())
	dir, limitFile, rel := filepath.Join("/sys/fs/cgroup", name), "memory.max", "/"+name
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil { // cgroup v1
		dir, limitFile = filepath.Join("/sys/fs/cgroup/memory", name), "memory.limit_in_bytes"
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create memory cgroup: %v", err)
	}
	t.Cleanup(func() {
		for i := 0; i < 50 && os.Remove(dir) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte("16777216"), 0o644); err != nil {
		t.Fatalf("limit memory cgroup: %v", err)
	}
	src, err := OpenKmsg("/dev/kmsg")
	if err != nil {
		t.Fatalf("open /dev/kmsg: %v", err)
	}
	kills := make(chan Kill, 16)
	done := make(chan error, 1)
	go func() { done <- Watch(src, func(k Kill) { kills <- k }) }()
	defer func() {
		src.Close()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	}()

	// tail buffers the endless line of /dev/zero: it grows until killed.
	cmd := exec.Command("/bin/sh", "-c", "echo $$ > "+filepath.Join(dir, "cgroup.procs")+" && exec tail /dev/zero")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("tail in a 16 MiB cgroup ended with %v, want killed by SIGKILL (the OOM killer)", err)
	}
	pid := cmd.Process.Pid
	deadline := time.After(60 * time.Second)
	for {
		select {
		case k := <-kills:
			if k.Pid != pid {
				continue // another process's kill on this machine
			}
			t.Logf("kernel reported: %s", describe(k))
			if k.Process != "tail" || k.Cgroup != rel || k.System() {
				t.Errorf("kill of pid %d: %s; want process tail, cgroup %s, not a system OOM", pid, describe(k), rel)
			}
			if _, _, ok := SystemOOM(k); ok {
				t.Errorf("a kill at a test cgroup's limit gave a SystemOOM event")
			}
			return
		case <-deadline:
			t.Fatalf("no OOM kill of pid %d read from /dev/kmsg within 60s", pid)
		}
	}
}
