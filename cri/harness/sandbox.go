package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PausePID returns the pid of a sandbox's pause process.
//
// It asks containerd: PodSandboxStatus with verbose=true carries
// info["info"], a JSON document whose "pid" is the pid of the sandbox
// task's init process (what `crictl inspectp` prints). That is the
// runtime's own record, so it names the right process even where the pause
// processes of several pods look alike, as with host network (one network
// namespace for all); a /proc scan would have to tell them apart by their
// namespaces or cgroups. KillSandbox cross-checks the pid with the cgroup.
func (c *Containerd) PausePID(ctx context.Context, sandboxID string) (int, error) {
	conn, err := c.conn()
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).PodSandboxStatus(ctx,
		&runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandboxID, Verbose: true})
	if err != nil {
		return 0, fmt.Errorf("pause pid of sandbox %s: PodSandboxStatus (verbose): %w", sandboxID, err)
	}
	raw, ok := resp.Info["info"]
	if !ok {
		return 0, fmt.Errorf("pause pid of sandbox %s: PodSandboxStatus (verbose) has no info[\"info\"]", sandboxID)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(raw), &info); err != nil {
		return 0, fmt.Errorf("pause pid of sandbox %s: decode info: %w", sandboxID, err)
	}
	if info.Pid <= 1 {
		// containerd sets the pid to 0 once the sandbox's task has exited.
		return 0, fmt.Errorf("pause pid of sandbox %s: containerd records pid %d (the sandbox is not running)", sandboxID, info.Pid)
	}
	return info.Pid, nil
}

// KillSandbox kills a sandbox's pause process with SIGKILL behind the
// agent's back (the real-containerd twin of sim.Runtime.KillSandbox) and
// returns its pid once the process has exited and the CRI reports the
// sandbox NOTREADY. Before the kill it checks that the pid runs
// PauseCommand in a cgroup named after the sandbox, so that it never kills
// anything else.
//
// What containerd 1.6 then shows (observed with host-network busybox pods):
// the sandbox is NOTREADY and its containers, each in its own PID namespace
// (NamespaceMode_CONTAINER, kubelet's default), keep RUNNING; containers
// that share the pause process's PID namespace die with it.
func (c *Containerd) KillSandbox(ctx context.Context, sandboxID string) (int, error) {
	pid, err := c.PausePID(ctx, sandboxID)
	if err != nil {
		return 0, fmt.Errorf("kill sandbox: %w", err)
	}
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil || !bytes.Contains(cg, []byte(sandboxID)) {
		return 0, fmt.Errorf("kill sandbox %s: pid %d: cgroup %q (%v) does not name the sandbox", sandboxID, pid, cg, err)
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	got := string(bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '}))
	if want := strings.Join(PauseCommand, " "); got != want {
		return 0, fmt.Errorf("kill sandbox %s: pid %d runs %q, not the pause command %q", sandboxID, pid, got, want)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill sandbox %s: kill -9 %d: %w", sandboxID, pid, err)
	}
	// The shim reaps its task: the pid leaves /proc, or stays a zombie
	// only until then.
	for {
		if _, state := stat(pid); state == "" || state == "Z" {
			break
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("kill sandbox %s: pause process %d alive after SIGKILL: %w", sandboxID, pid, ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn, err := c.conn()
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	for {
		resp, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sandboxID})
		if err == nil && resp.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
			return pid, nil
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("kill sandbox %s: pause process %d is dead but the CRI does not report the sandbox NOTREADY (last: %v, %v)",
				sandboxID, pid, resp.GetStatus().GetState(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
