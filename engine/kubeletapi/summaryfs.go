package kubeletapi

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/speclet/speclet/engine/cgroupstats"
)

// The parts of /stats/summary that are neither the CRI's nor cgroups':
// file systems (statfs), directory usage (a walk, as kubelet's du), the
// node's process limits and network interfaces.

// statfsStats is the file system holding path: capacity, available,
// inodes; used is filled by the caller when it knows it (nil: the file
// system's used blocks).
func statfsStats(path string, now time.Time) *statsapi.FsStats {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil
	}
	capacity, avail := st.Blocks*uint64(st.Bsize), st.Bavail*uint64(st.Bsize)
	used := capacity - st.Bfree*uint64(st.Bsize)
	files, free := st.Files, st.Ffree
	usedInodes := files - free
	return &statsapi.FsStats{Time: metav1.NewTime(now), CapacityBytes: &capacity, AvailableBytes: &avail, UsedBytes: &used,
		Inodes: &files, InodesFree: &free, InodesUsed: &usedInodes}
}

// usage is a directory tree's bytes on disk and inodes.
type usage struct {
	bytes, inodes uint64
	at            time.Time
}

// duCache keeps each directory's usage for duMaxAge, as kubelet keeps
// volume usage between its periodic measurements (the walk is the
// expensive part of a summary).
type duCache struct {
	mu sync.Mutex
	m  map[string]usage
}

// duMaxAge is how long a directory's usage is reused (kubelet's
// --volume-stats-agg-period is 1m).
const duMaxAge = time.Minute

func (c *duCache) du(dir string, now time.Time) (usage, bool) {
	c.mu.Lock()
	if u, ok := c.m[dir]; ok && now.Sub(u.at) < duMaxAge {
		c.mu.Unlock()
		return u, true
	}
	c.mu.Unlock()
	u := usage{at: now}
	found := false
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		found = true
		u.inodes++
		if st, ok := info.Sys().(*unix.Stat_t); ok {
			u.bytes += uint64(st.Blocks) * 512
		} else {
			u.bytes += uint64(info.Size())
		}
		return nil
	})
	if !found {
		return u, false
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]usage{}
	}
	c.m[dir] = u
	c.mu.Unlock()
	return u, true
}

// prune forgets the directories not under any of keep's prefixes.
func (c *duCache) prune(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for d, u := range c.m {
		if now.Sub(u.at) >= duMaxAge {
			delete(c.m, d)
		}
	}
}

// dirStats is a directory's usage on the file system holding it.
func (a *API) dirStats(dir string, now time.Time) *statsapi.FsStats {
	u, ok := a.stats.du.du(dir, now)
	if !ok {
		return nil
	}
	fs := statfsStats(dir, now)
	if fs == nil {
		return nil
	}
	fs.UsedBytes, fs.InodesUsed = &u.bytes, &u.inodes
	return fs
}

// volumeStats are the pod's volumes under <root>/pods/<uid>/volumes that
// kubelet measures (every plugin's directory but host paths): name and
// usage.
func (a *API) volumeStats(uid string, now time.Time) []statsapi.VolumeStats {
	if a.c.RootDir == "" {
		return nil
	}
	base := filepath.Join(a.c.RootDir, "pods", uid, "volumes")
	plugins, err := os.ReadDir(base)
	if err != nil {
		return nil
	}
	var out []statsapi.VolumeStats
	for _, p := range plugins {
		if !p.IsDir() || strings.HasSuffix(p.Name(), "~host-path") {
			continue
		}
		vols, err := os.ReadDir(filepath.Join(base, p.Name()))
		if err != nil {
			continue
		}
		for _, v := range vols {
			if fs := a.dirStats(filepath.Join(base, p.Name(), v.Name()), now); fs != nil {
				out = append(out, statsapi.VolumeStats{Name: v.Name(), FsStats: *fs})
			}
		}
	}
	return out
}

// logStats is a container's log directory
// (<pod-logs-dir>/<ns>_<name>_<uid>/<container>).
func (a *API) logStats(ns, name, uid, container string, now time.Time) *statsapi.FsStats {
	if a.c.PodLogsDir == "" {
		return nil
	}
	return a.dirStats(filepath.Join(a.c.PodLogsDir, ns+"_"+name+"_"+uid, container), now)
}

// networkStats is interfaces as the summary reports them: all of them,
// and eth0's inline (kubelet's default interface).
func networkStats(ifs []cgroupstats.Interface, now time.Time) *statsapi.NetworkStats {
	n := &statsapi.NetworkStats{Time: metav1.NewTime(now), Interfaces: []statsapi.InterfaceStats{}}
	for _, i := range ifs {
		is := statsapi.InterfaceStats{Name: i.Name, RxBytes: ptr(i.RxBytes), RxErrors: ptr(i.RxErrors), TxBytes: ptr(i.TxBytes), TxErrors: ptr(i.TxErrors)}
		n.Interfaces = append(n.Interfaces, is)
		if i.Name == "eth0" {
			n.InterfaceStats = is
		}
	}
	return n
}

func ptr[T any](v T) *T { return &v }

// rlimitStats is the node's process limit and count (kubelet's rlimit:
// kernel.pid_max, sysinfo's procs).
func rlimitStats(now time.Time) *statsapi.RlimitStats {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return nil
	}
	var maxPID int64
	for _, c := range strings.TrimSpace(string(b)) {
		maxPID = maxPID*10 + int64(c-'0')
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return nil
	}
	procs := int64(si.Procs)
	return &statsapi.RlimitStats{Time: metav1.NewTime(now), MaxPID: &maxPID, NumOfRunningProcesses: &procs}
}

// imageFsStats is the runtime's image file system (CRI ImageFsInfo): its
// usage as the runtime counts it, its size from statfs of its mount point.
func (a *API) imageFsStats(ctx context.Context, now time.Time) (*statsapi.FsStats, string) {
	r, err := a.c.Runtime.ImageFsInfo(ctx)
	if err != nil || len(r.GetImageFilesystems()) == 0 {
		return nil, ""
	}
	u := r.GetImageFilesystems()[0]
	mp := u.GetFsId().GetMountpoint()
	fs := statfsStats(mp, now)
	if fs == nil {
		return nil, mp
	}
	if u.UsedBytes != nil {
		fs.UsedBytes = ptr(u.UsedBytes.Value)
	}
	if u.InodesUsed != nil {
		fs.InodesUsed = ptr(u.InodesUsed.Value)
	}
	return fs, mp
}

// cgroupCPU is a cgroup reading's CPU stats, with the rate from the
// previous reading of the same cgroup (kept in rates).
func (a *API) cgroupCPU(key string, st cgroupstats.Stats) *statsapi.CPUStats {
	if !st.HaveCPU {
		return nil
	}
	cpu := &statsapi.CPUStats{Time: metav1.NewTime(st.Time), UsageCoreNanoSeconds: ptr(st.CPUUsageNs), PSI: psiStats(st.CPUPressure)}
	a.stats.rates.mu.Lock()
	defer a.stats.rates.mu.Unlock()
	if a.stats.rates.last == nil {
		a.stats.rates.last = map[string]cpuSample{}
	}
	if prev, ok := a.stats.rates.last[key]; ok && st.CPUUsageNs >= prev.ns && st.Time.After(prev.at) {
		cpu.UsageNanoCores = ptr(uint64(float64(st.CPUUsageNs-prev.ns) / st.Time.Sub(prev.at).Seconds()))
	}
	a.stats.rates.last[key] = cpuSample{ns: st.CPUUsageNs, at: st.Time}
	return cpu
}

// cgroupMemory is a cgroup reading's memory stats; available is the
// limit less the working set when the cgroup has a limit. The page faults
// are the cgroup's own (memory.stat pgfault, pgmajfault), as kubelet's
// cAdvisor reports them (ContainerData): on cgroup v1 a parent without
// processes (a pod's cgroup, kubepods) has next to none, where the
// hierarchy's total_pgfault counts its children's; on v2 the two are one.
func cgroupMemory(st cgroupstats.Stats) *statsapi.MemoryStats {
	if !st.HaveMemory {
		return nil
	}
	m := &statsapi.MemoryStats{Time: metav1.NewTime(st.Time), UsageBytes: ptr(st.MemUsage), WorkingSetBytes: ptr(st.MemWorkingSet),
		RSSBytes: ptr(st.MemRSS), PageFaults: ptr(st.PgFault), MajorPageFaults: ptr(st.PgMajFault), PSI: psiStats(st.MemPressure)}
	if st.MemLimit > 0 {
		m.AvailableBytes = ptr(sat(st.MemLimit, st.MemWorkingSet))
	}
	return m
}

// cgroupIO is a cgroup reading's I/O stats: its I/O pressure, nil when
// the kernel keeps none (kubelet's IOStats holds nothing else).
func cgroupIO(st cgroupstats.Stats) *statsapi.IOStats {
	if st.IOPressure == nil {
		return nil
	}
	return &statsapi.IOStats{Time: metav1.NewTime(st.Time), PSI: psiStats(st.IOPressure)}
}

// psiStats is a pressure reading as the Summary API's; the totals stay in
// the kernel's microseconds, as kubelet passes cAdvisor's through.
func psiStats(p *cgroupstats.Pressure) *statsapi.PSIStats {
	if p == nil {
		return nil
	}
	data := func(d cgroupstats.PressureData) statsapi.PSIData {
		return statsapi.PSIData{Total: d.Total, Avg10: d.Avg10, Avg60: d.Avg60, Avg300: d.Avg300}
	}
	return &statsapi.PSIStats{Some: data(p.Some), Full: data(p.Full)}
}

func sat(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// cpuSample is a cgroup's CPU time at a reading.
type cpuSample struct {
	ns uint64
	at time.Time
}

// cpuRates keeps the last reading of each cgroup, for UsageNanoCores.
type cpuRates struct {
	mu   sync.Mutex
	last map[string]cpuSample
}

// prune forgets the cgroups not read at now.
func (r *cpuRates) prune(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, s := range r.last {
		if !s.at.Equal(now) {
			delete(r.last, k)
		}
	}
}

// fillMemory fills the fields the CRI left out of m from the cgroup's.
func fillMemory(m, cg *statsapi.MemoryStats) *statsapi.MemoryStats {
	if m == nil {
		return cg
	}
	if cg == nil {
		return m
	}
	if m.AvailableBytes == nil {
		m.AvailableBytes = cg.AvailableBytes
	}
	if m.RSSBytes == nil {
		m.RSSBytes = cg.RSSBytes
	}
	if m.PageFaults == nil {
		m.PageFaults = cg.PageFaults
	}
	if m.MajorPageFaults == nil {
		m.MajorPageFaults = cg.MajorPageFaults
	}
	if m.PSI == nil {
		m.PSI = cg.PSI
	}
	return m
}

// ownCgroup is this process's cgroup (the memory controller's on v1).
func ownCgroup(v2 bool) string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if v2 && f[0] == "0" {
			return f[2]
		}
		if !v2 && (f[1] == "memory" || strings.Contains(","+f[1]+",", ",memory,")) {
			return f[2]
		}
	}
	return ""
}

// ephemeral is the pod's ephemeral storage as kubelet counts it: its
// containers' writable layers and logs and its volumes, on the root
// file system's capacity.
func ephemeral(p *statsapi.PodStats, now time.Time) *statsapi.FsStats {
	var used, inodes uint64
	var base *statsapi.FsStats
	any := false
	for _, c := range p.Containers {
		for _, fs := range []*statsapi.FsStats{c.Rootfs, c.Logs} {
			if fs == nil {
				continue
			}
			if base == nil && fs.CapacityBytes != nil {
				base = fs
			}
			if fs.UsedBytes != nil {
				used += *fs.UsedBytes
				any = true
			}
			if fs.InodesUsed != nil {
				inodes += *fs.InodesUsed
			}
		}
	}
	for _, v := range p.VolumeStats {
		if v.UsedBytes != nil {
			used += *v.UsedBytes
			any = true
		}
		if v.InodesUsed != nil {
			inodes += *v.InodesUsed
		}
	}
	if !any {
		return nil
	}
	out := &statsapi.FsStats{Time: metav1.NewTime(now), UsedBytes: &used, InodesUsed: &inodes}
	if base != nil {
		out.CapacityBytes, out.AvailableBytes, out.Inodes, out.InodesFree = base.CapacityBytes, base.AvailableBytes, base.Inodes, base.InodesFree
	}
	return out
}
