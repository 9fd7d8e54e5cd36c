package cluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testKernelOOMOutsidePods: a process outside every pod, in a test-made
// memory cgroup limited to 16 MiB, is killed by the kernel's OOM killer.
// node-a's OOM watcher reads the kill from /dev/kmsg (its log names the
// pid, the process and the test cgroup whose limit was enforced) and, by
// kubelet's rule, records no SystemOOM: the kill enforced a cgroup's limit,
// the machine did not run out of memory. A system-wide OOM, the one kind
// kubelet reports, is not caused here: the kernel would pick its victim
// among every process of the machine.
func testKernelOOMOutsidePods(t *testing.T, e *env) {
	name := fmt.Sprintf("speclet-oom-%d", os.Getpid())
	dir, limitFile := filepath.Join("/sys/fs/cgroup", name), "memory.max"
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil { // cgroup v1
		dir, limitFile = filepath.Join("/sys/fs/cgroup/memory", name), "memory.limit_in_bytes"
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create memory cgroup: %v", err)
	}
	t.Cleanup(func() { removeCgroupTree(t, "/"+name) })
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte("16777216"), 0o644); err != nil {
		t.Fatalf("limit memory cgroup: %v", err)
	}
	// tail buffers the endless line of /dev/zero: it grows until killed.
	cmd := exec.Command("/bin/sh", "-c", "echo $$ > "+filepath.Join(dir, "cgroup.procs")+" && exec tail /dev/zero")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("tail in a 16 MiB cgroup ended with %v, want killed by SIGKILL (the OOM killer)", err)
	}
	pid := cmd.Process.Pid
	want := fmt.Sprintf(`msg="OOM kill reported by the kernel" pid=%d process=tail cgroup=/%s `, pid, name)
	var line string
	deadline := time.Now().Add(60 * time.Second)
	for line == "" {
		b, _ := os.ReadFile(e.a.LogPath)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, want) {
				line = l
			}
		}
		if line == "" && time.Now().After(deadline) {
			t.Fatalf("node-a's log has no %q within 60s; its log:\n%s", want, e.a.LogTail(30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.HasSuffix(line, "system=false") {
		t.Errorf("node-a logged %q: want system=false", line)
	}
	l, err := e.admin.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "reason=SystemOOM"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range l.Items {
		if strings.HasSuffix(ev.Message, fmt.Sprintf("pid: %d", pid)) {
			t.Errorf("SystemOOM event %q for a kill at a test cgroup's limit", ev.Message)
		}
	}
}
