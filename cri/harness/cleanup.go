package harness

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/speclet/speclet/cri/mountinfo"
)

// Process is one process of the machine as /proc shows it.
type Process struct {
	PID     int
	PPID    int
	Cmdline string // arguments joined by spaces
}

// processes lists every live process of the machine. Zombies are left out:
// they have exited and only wait for their parent (often init) to reap them.
func processes() []Process {
	entries, _ := os.ReadDir("/proc")
	var ps []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		parent, state := stat(pid)
		if state == "Z" || state == "" {
			continue
		}
		ps = append(ps, Process{PID: pid, PPID: parent, Cmdline: strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))})
	}
	return ps
}

// stat returns the parent and the state letter ("R", "S", "Z", ...) of pid;
// state is "" when the process is gone.
func stat(pid int) (ppid int, state string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, ""
	}
	// The command name in parentheses may hold spaces; fields follow the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, ""
	}
	n, _ := strconv.Atoi(f[1])
	return n, f[0]
}

// Leftovers lists the processes that belong to the harness rooted at dir: any
// whose command line names dir (containerd, its shims, runc) and their
// descendants (the pods' processes). It is what Stop guarantees to be empty.
func Leftovers(dir string) []Process {
	ps := processes()
	children := map[int][]Process{}
	for _, p := range ps {
		children[p.PPID] = append(children[p.PPID], p)
	}
	seen := map[int]bool{}
	var out []Process
	var walk func(p Process)
	walk = func(p Process) {
		if seen[p.PID] || p.PID == os.Getpid() {
			return
		}
		seen[p.PID] = true
		out = append(out, p)
		for _, c := range children[p.PID] {
			walk(c)
		}
	}
	for _, p := range ps {
		if strings.Contains(p.Cmdline, dir+"/") {
			walk(p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// Mounts lists the mount points at or under dir in /proc/self/mountinfo,
// deepest first.
func Mounts(dir string) []string {
	out, _ := mountinfo.Under(dir)
	return out
}

// Unmount lazily unmounts every mount at or under dir, deepest first, until
// Mounts(dir) is empty (mounts propagated by an unmount are caught by the
// next round); it fails naming what is still mounted after 20 rounds.
func Unmount(dir string) error {
	var errs []error
	for try := 0; ; try++ {
		mounts := Mounts(dir)
		if len(mounts) == 0 {
			break
		}
		if try == 20 {
			errs = append(errs, fmt.Errorf("unmount under %s: still mounted: %s", dir, strings.Join(mounts, ", ")))
			break
		}
		for _, m := range mounts {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
	}
	return errors.Join(errs...)
}

// LinkExists reports whether the network interface name exists.
func LinkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// reap removes everything a harness rooted at dir may have left: it kills the
// processes of Leftovers(dir) and the processes in the cgroups of its
// containers, removes those cgroups (runc leaves them when its shim is
// killed; hundreds of empty memory cgroups slow every later runc create),
// lazily unmounts everything under dir, deletes the CNI bridge and the shim
// sockets containerd 1.6 keeps in /run/containerd/s for known plus the ids
// now in its state. It does not remove dir.
func reap(l layout, known ...string) error {
	var errs []error
	ids := append(taskIDs(l), known...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := append(Leftovers(l.dir), cgroupProcesses(ids)...)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("kill leftover processes: still running: %s", describe(left)))
			break
		}
		for _, p := range left {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, d := range Cgroups(ids) {
		// Deepest first: a container's cgroup may sit under its sandbox's.
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	if err := Unmount(l.dir); err != nil {
		errs = append(errs, err)
	}
	if b, err := os.ReadFile(l.bridgeFile()); err == nil {
		if bridge := strings.TrimSpace(string(b)); bridge != "" && LinkExists(bridge) {
			if out, err := exec.Command("ip", "link", "delete", bridge).CombinedOutput(); err != nil && LinkExists(bridge) {
				errs = append(errs, fmt.Errorf("delete bridge %s: %w: %s", bridge, err, strings.TrimSpace(string(out))))
			}
		}
	}
	for _, id := range ids {
		_ = os.Remove(shimSocket(l.socket(), id))
	}
	return errors.Join(errs...)
}

// taskIDs lists the ids of the sandboxes and containers containerd has state
// for under l.
func taskIDs(l layout) []string {
	entries, _ := os.ReadDir(l.taskDir())
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids
}

// TaskIDs lists the ids of the sandboxes and containers for which
// containerd holds a task now (its runtime v2 bundle directory): a container
// listed here cannot be removed through the CRI ("cannot delete running
// task") until the task is gone.
func (c *Containerd) TaskIDs() []string { return taskIDs(c.l) }

// cgroupProcesses lists the processes whose cgroup path names one of ids:
// the pods' processes even when their shim is already gone.
func cgroupProcesses(ids []string) []Process {
	if len(ids) == 0 {
		return nil
	}
	var out []Process
	for _, p := range processes() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.PID))
		if err != nil {
			continue
		}
		for _, id := range ids {
			if bytes.Contains(b, []byte(id)) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// Cgroups lists the cgroup directories, in every hierarchy under
// /sys/fs/cgroup, whose name is one of ids (the sandboxes and containers of
// a harness instance: runc names a container's cgroup after its ID, under
// the CgroupParent or containerd's k8s.io), deepest first.
func Cgroups(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var out []string
	_ = filepath.WalkDir(cgroupRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.Count(path[len(cgroupRoot):], "/") > 6 {
			return fs.SkipDir
		}
		if want[d.Name()] {
			out = append(out, path)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out
}

// shimSocket is where containerd 1.6 puts the socket of the shim for id
// (pkg/shim SocketAddress): it cannot be moved under the harness's Dir.
func shimSocket(containerdSocket, id string) string {
	d := sha256.Sum256([]byte(filepath.Join(containerdSocket, criNamespace, id)))
	return fmt.Sprintf("/run/containerd/s/%x", d)
}

func describe(ps []Process) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%d %q", p.PID, p.Cmdline))
	}
	return strings.Join(parts, "; ")
}

// ReapStale cleans up after harness instances under /tmp whose owning process
// is gone (a test binary that was killed before its cleanup ran) and removes
// their directories. It logs what it removes to log.
func ReapStale(log func(format string, args ...any)) {
	dirs, _ := filepath.Glob(filepath.Join(tmpRoot, dirPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(layout{d}.ownerFile())
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) == nil {
			continue
		}
		if err := reap(layout{d}); err != nil {
			log("harness: clean stale %s: %v", d, err)
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			log("harness: remove stale %s: %v", d, err)
			continue
		}
		log("harness: removed stale instance %s (owner pid %d gone)", d, pid)
	}
}
