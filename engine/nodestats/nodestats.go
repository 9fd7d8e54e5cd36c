// Package nodestats measures the eviction signals of the node on the host,
// as kubelet's summary provider does through cadvisor:
//
//   - memory.available: MemTotal of /proc/meminfo less the working set of
//     the root memory cgroup (usage less inactive file pages; cgroup v1
//     memory.usage_in_bytes and memory.stat total_inactive_file, v2
//     /proc/meminfo's MemTotal − MemFree − Buffers − Cached + Active(file)
//     as the working set);
//   - nodefs.available, nodefs.inodesFree: statfs of the root directory
//     (--root-dir), available blocks and free inodes;
//   - imagefs.available, imagefs.inodesFree: statfs of the image
//     filesystem's mountpoint (CRI ImageFsInfo);
//   - allocatableMemory.available (with Host.Pods): the pods cgroup's
//     memory limit less its working set (usage less inactive file pages:
//     v1 memory.limit_in_bytes, memory.usage_in_bytes and memory.stat
//     total_inactive_file; v2 memory.max, memory.current and memory.stat
//     inactive_file), capacity the limit; left out while the cgroup has
//     no limit;
//   - pid.available: the smaller of kernel.pid_max and kernel.threads-max,
//     less the processes in /proc.
//
// Capacities come with each observation, so percentage thresholds work.
package nodestats

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/speclet/speclet/engine/cgroups"
	"github.com/speclet/speclet/engine/eviction"
)

// Host is where the measurements are read; zero fields get the real
// paths.
type Host struct {
	Proc       string // default /proc
	CgroupRoot string // default /sys/fs/cgroup
	// Pods is the memory cgroup directory of the pods (kubepods) when
	// node allocatable is enforced on it; "" leaves
	// allocatableMemory.available out.
	Pods string
}

func (h Host) proc() string {
	if h.Proc == "" {
		return "/proc"
	}
	return h.Proc
}

func (h Host) cgroup() string {
	if h.CgroupRoot == "" {
		return "/sys/fs/cgroup"
	}
	return h.CgroupRoot
}

// Measure returns the signals of the node: nodefs on rootDir, imagefs on
// imageFs ("" leaves imagefs out). A signal that cannot be read is an
// error naming it.
func (h Host) Measure(rootDir, imageFs string) (eviction.Observations, error) {
	obs := eviction.Observations{}
	mem, err := h.memory()
	if err != nil {
		return nil, fmt.Errorf("measure memory.available: %w", err)
	}
	obs["memory.available"] = mem
	if h.Pods != "" {
		o, limited, err := podsMemory(h.Pods)
		if err != nil {
			return nil, fmt.Errorf("measure %s: %w", eviction.AllocatableMemory, err)
		}
		if limited {
			obs[eviction.AllocatableMemory] = o
		}
	}
	avail, capacity, free, inodes, err := fsStats(rootDir)
	if err != nil {
		return nil, fmt.Errorf("measure nodefs.available: %w", err)
	}
	obs["nodefs.available"] = eviction.Observation{Available: avail, Capacity: capacity}
	obs["nodefs.inodesFree"] = eviction.Observation{Available: free, Capacity: inodes}
	if imageFs != "" {
		avail, capacity, free, inodes, err := fsStats(imageFs)
		if err != nil {
			return nil, fmt.Errorf("measure imagefs.available: %w", err)
		}
		obs["imagefs.available"] = eviction.Observation{Available: avail, Capacity: capacity}
		obs["imagefs.inodesFree"] = eviction.Observation{Available: free, Capacity: inodes}
	}
	pids, err := h.pids()
	if err != nil {
		return nil, fmt.Errorf("measure pid.available: %w", err)
	}
	obs["pid.available"] = pids
	return obs, nil
}

func fsStats(path string) (avail, capacity, freeInodes, inodes int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return int64(st.Bavail) * st.Bsize, int64(st.Blocks) * st.Bsize, int64(st.Ffree), int64(st.Files), nil
}

func (h Host) memory() (eviction.Observation, error) {
	mi, err := cgroups.Meminfo(filepath.Join(h.proc(), "meminfo"))
	if err != nil {
		return eviction.Observation{}, err
	}
	mem, ok := mi["MemTotal"]
	if !ok {
		return eviction.Observation{}, fmt.Errorf("%s/meminfo has no MemTotal", h.proc())
	}
	total := int64(mem)
	ws, err := h.workingSetV1()
	if err != nil {
		// cgroup v2 (no root memory.usage_in_bytes): the machine's
		// working set from /proc/meminfo.
		ws = total - int64(mi["MemFree"]+mi["Buffers"]+mi["Cached"]) + int64(mi["Active(file)"])
	}
	return eviction.Observation{Available: max(total-ws, 0), Capacity: total}, nil
}

// workingSetV1 is the root memory cgroup's usage less its inactive file
// pages (cadvisor's working set).
func (h Host) workingSetV1() (int64, error) {
	dir := filepath.Join(h.cgroup(), "memory")
	b, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return 0, err
	}
	usage, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s/memory.usage_in_bytes: %w", dir, err)
	}
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	var inactive int64
	for _, l := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(l, "total_inactive_file "); ok {
			inactive, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return max(usage-inactive, 0), nil
}

// podsMemory reads the pods cgroup dir: its limit less its working set;
// limited is false when the cgroup has no limit.
func podsMemory(dir string) (o eviction.Observation, limited bool, err error) {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		return strings.TrimSpace(string(b)), err
	}
	limitFile, usageFile, inactiveKey := "memory.max", "memory.current", "inactive_file "
	if _, err := os.Stat(filepath.Join(dir, limitFile)); err != nil { // cgroup v1
		limitFile, usageFile, inactiveKey = "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file "
	}
	ls, err := read(limitFile)
	if err != nil {
		return o, false, err
	}
	if ls == "max" {
		return o, false, nil
	}
	limit, err := strconv.ParseInt(ls, 10, 64)
	if err != nil {
		return o, false, fmt.Errorf("%s/%s: %w", dir, limitFile, err)
	}
	if limit >= 1<<62 { // v1's "unlimited" (a page-rounded MaxInt64)
		return o, false, nil
	}
	us, err := read(usageFile)
	if err != nil {
		return o, false, err
	}
	usage, err := strconv.ParseInt(us, 10, 64)
	if err != nil {
		return o, false, fmt.Errorf("%s/%s: %w", dir, usageFile, err)
	}
	stat, err := read("memory.stat")
	if err != nil {
		return o, false, err
	}
	var inactive int64
	for _, l := range strings.Split(stat, "\n") {
		if v, ok := strings.CutPrefix(l, inactiveKey); ok {
			inactive, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	ws := max(usage-inactive, 0)
	return eviction.Observation{Available: max(limit-ws, 0), Capacity: limit}, true, nil
}

func (h Host) pids() (eviction.Observation, error) {
	read := func(name string) (int64, error) {
		b, err := os.ReadFile(filepath.Join(h.proc(), "sys", "kernel", name))
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	limit, err := read("pid_max")
	if err != nil {
		return eviction.Observation{}, err
	}
	if t, err := read("threads-max"); err == nil && t < limit {
		limit = t
	}
	ents, err := os.ReadDir(h.proc())
	if err != nil {
		return eviction.Observation{}, err
	}
	var procs int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() {
			procs++
		}
	}
	return eviction.Observation{Available: max(limit-procs, 0), Capacity: limit}, nil
}
