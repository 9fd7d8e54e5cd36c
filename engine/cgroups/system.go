// The node's system cgroups (kubelet's --kubelet-cgroups and
// --system-cgroups): processes moved into a cgroup of their own so that
// the Summary API can report what the node agent and the rest of the
// system use.

package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/speclet/speclet/engine/resources"
)

// Join makes cgroup rel (an absolute cgroup path such as "/kubelet", not
// under --cgroup-root) in every hierarchy and, on a hybrid host, in the
// unified mount, and moves process pid there with all its threads. On v1
// the memory the process charged before stays charged where it was (the
// kernels of this project's hosts refuse memory.move_charge_at_immigrate),
// as with kubelet: join early.
func (m *Manager) Join(rel string, pid int) error {
	if err := m.mkdirSystem(rel); err != nil {
		return err
	}
	return m.join(rel, pid)
}

// join moves pid into rel, made, in every hierarchy; errGone when it has
// exited.
func (m *Manager) join(rel string, pid int) error {
	for _, dir := range m.podDirs(rel) {
		if err := m.move(dir, pid); err != nil {
			return err
		}
	}
	return nil
}

// Adopt moves every user-space process that is in the root cgroup into
// cgroup rel, in every hierarchy (kubelet's --system-cgroups and its
// ensureSystemCgroups): a process is in the root when it is at the root of
// the devices hierarchy on v1 (the one kubelet reads; the first hierarchy
// when devices is not mounted), of the unified one on v2. Such a process
// moves in every hierarchy, also where another manager had put it
// elsewhere, as kubelet moves it. Kernel threads and the init process
// (pid 1) stay. It returns how many processes moved; one that exits
// during the move is not an error.
func (m *Manager) Adopt(rel string) (int, error) {
	if err := m.mkdirSystem(rel); err != nil {
		return 0, err
	}
	n := 0
	for _, pid := range pidsOf(filepath.Join(m.reference(), "cgroup.procs")) {
		if pid == 1 || m.kernelThread(pid) {
			continue
		}
		err := m.join(rel, pid)
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// reference is the mount whose root's processes are "in the root cgroup".
func (m *Manager) reference() string {
	if m.v2 {
		return m.root
	}
	for _, h := range m.hiers {
		if h.ctrls["devices"] {
			return h.dir
		}
	}
	return m.hiers[0].dir
}

// Where is the cgroup of process pid in each hierarchy, by mount point
// (the hybrid unified mount included), as /proc/<pid>/cgroup gives them;
// Put moves it back there.
func (m *Manager) Where(pid int) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(m.proc, strconv.Itoa(pid), "cgroup"))
	if err != nil {
		return nil, fmt.Errorf("cgroups of process %d: %w", pid, err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "" {
			if m.v2 {
				out[m.root] = f[2]
			} else if m.unified != "" {
				out[m.unified] = f[2]
			}
			continue
		}
		for _, h := range m.hiers {
			if sameControllers(h.ctrls, f[1]) {
				out[h.dir] = f[2]
			}
		}
	}
	return out, nil
}

// Put moves process pid into the cgroups where gives (Where's map). A
// process that has exited, or a cgroup removed since, is not an error:
// there is nothing to put back.
func (m *Manager) Put(pid int, where map[string]string) error {
	for mount, rel := range where {
		err := m.move(filepath.Join(mount, rel), pid)
		if errors.Is(err, errGone) || errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sameControllers: the hierarchy carries exactly the controllers of a
// /proc/<pid>/cgroup line ("cpu,cpuacct"; named ones such as name=systemd
// are no hierarchy of ours).
func sameControllers(ctrls map[string]bool, list string) bool {
	names := strings.Split(list, ",")
	for _, c := range names {
		if !ctrls[c] {
			return false
		}
	}
	return len(names) == len(ctrls)
}

// Release moves the processes of cgroup rel back to the root of each
// hierarchy and removes rel: the undoing of Join and Adopt, for a harness
// that leaves the host as it found it. A process that exits meanwhile is
// not an error.
func (m *Manager) Release(rel string) error {
	if err := checkSystem(rel); err != nil {
		return err
	}
	for _, mnt := range m.mounts() {
		dir := filepath.Join(mnt, rel)
		for _, pid := range pidsOf(filepath.Join(dir, "cgroup.procs")) {
			if err := m.move(mnt, pid); err != nil && !errors.Is(err, errGone) {
				return err
			}
		}
		if err := removeTree(dir); err != nil {
			return err
		}
	}
	return nil
}

// mkdirSystem checks rel and makes it in every hierarchy (create, without
// limits) and in the hybrid unified mount.
func (m *Manager) mkdirSystem(rel string) error {
	if err := checkSystem(rel); err != nil {
		return err
	}
	if err := m.create(rel, resources.CgroupConfig{}); err != nil {
		return err
	}
	if m.unified != "" {
		return mkdirV1(hier{dir: m.unified}, rel)
	}
	return nil
}

// checkSystem: a system cgroup is a clean absolute path other than the
// root.
func checkSystem(rel string) error {
	if rel == "/" || filepath.Clean(rel) != rel || !strings.HasPrefix(rel, "/") {
		return fmt.Errorf("cgroups: system cgroup %q: want a clean absolute cgroup path other than the root, such as /system", rel)
	}
	return nil
}

// errGone: the process exited before it could be moved.
var errGone = errors.New("process gone")

// move writes pid into dir's cgroup.procs.
func (m *Manager) move(dir string, pid int) error {
	err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
	if errors.Is(err, syscall.ESRCH) {
		return errGone
	}
	if err != nil {
		return fmt.Errorf("move process %d into cgroup %s: %w", pid, dir, err)
	}
	return nil
}

// pidsOf reads a cgroup.procs file; nil when it cannot be read.
func pidsOf(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// kernelThread reports whether pid is a kernel thread (no executable), as
// kubelet's isKernelPid: those cannot leave the root cgroup. A process
// that has exited counts as one: there is nothing to move.
func (m *Manager) kernelThread(pid int) bool {
	_, err := os.Readlink(filepath.Join(m.proc, strconv.Itoa(pid), "exe"))
	return err != nil && !errors.Is(err, fs.ErrPermission)
}
