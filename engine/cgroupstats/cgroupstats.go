// Package cgroupstats reads what cAdvisor reads of a cgroup and of the
// processes in it, from the cgroup files (v1 and v2) and /proc: CPU time
// (total, user, system, CFS throttling), memory (usage, working set, RSS,
// cache, mapped files, swap, the peak, failures and page faults, OOM
// kills), block I/O per device, pressure stall information (PSI) of CPU,
// memory and I/O, the cgroup's spec (CPU shares, period,
// quota; memory limit, reservation, swap limit), its processes, threads,
// file descriptors and sockets, the first process's open-files limit, and
// the network interfaces of its network namespace.
//
// It is the source of /metrics/cadvisor and of the parts of /stats/summary
// the CRI does not give (engine/kubeletapi): speclet reads the files
// cAdvisor reads rather than embedding cAdvisor, which watches every
// cgroup of the host with inotify and keeps a history in memory; here a
// scrape reads only the cgroups of the node's pods, when asked.
//
// Contracts:
//   - Read never fails on a file that is missing (a controller not
//     mounted, a kernel without the file): the value is left out (its Have
//     flag false, or the field zero where cAdvisor reports zero). It fails
//     only when the cgroup itself is gone.
//   - Find maps container IDs to their cgroups by walking the hierarchy
//     once for the IDs it does not know yet and keeps what it found; Prune
//     forgets the IDs no longer asked for.
//   - Interface names cAdvisor ignores (lo, veth*, docker*, nerdctl*) are
//     left out of Network, as cAdvisor leaves them out.
package cgroupstats

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Dirs is where a cgroup's files are: Dir(ctrl, rel) is the directory of
// cgroup rel ("/kubepods/pod<uid>/<id>") for controller ctrl ("memory",
// "cpuacct", ...), "" when no hierarchy carries it (engine/cgroups'
// Manager.Dir). V2 is whether the unified hierarchy is in use.
type Dirs struct {
	Dir  func(ctrl, rel string) string
	V2   bool
	Proc string // default /proc
}

func (d Dirs) proc() string {
	if d.Proc == "" {
		return "/proc"
	}
	return d.Proc
}

// Stats is one reading of a cgroup. Counters are cumulative since the
// cgroup was made.
type Stats struct {
	Time time.Time

	CPUUsageNs, CPUUserNs, CPUSystemNs uint64
	HaveCPU                            bool
	Periods, ThrottledPeriods          uint64
	ThrottledNs                        uint64
	HaveThrottling                     bool

	MemUsage, MemWorkingSet, MemRSS, MemCache, MemMappedFile, MemSwap uint64
	MemMaxUsage, MemFailcnt                                           uint64
	PgFault, PgMajFault, HierPgFault, HierPgMajFault                  uint64
	OOMKills                                                          uint64
	HaveMemory                                                        bool

	// Spec: the limits written to the cgroup. MemLimit, MemReservation
	// and SwapLimit are 0 when unlimited (as cAdvisor reports them);
	// CPUQuota is 0 when there is none.
	CPUShares, CPUPeriod, CPUQuota      uint64
	MemLimit, MemReservation, SwapLimit uint64
	HaveSpec                            bool

	Blkio []Device

	Processes, Threads, ThreadsMax, FDs, Sockets uint64
	OpenFilesSoft                                uint64
	HaveProcesses                                bool
	// Pid is a process of the cgroup (its first), 0 when it has none.
	Pid int

	// CPUPressure, MemPressure and IOPressure are the kernel's pressure
	// stall information of the cgroup ({cpu,memory,io}.pressure in its
	// cgroup2 directory: on a v1 host the hybrid mount's), nil where the
	// kernel keeps none.
	CPUPressure, MemPressure, IOPressure *Pressure
}

// Pressure is a cgroup's pressure stall information for one resource: the
// share of time some (or all, Full) of its tasks were stalled on it.
type Pressure struct {
	Some, Full PressureData
}

// PressureData is one line of a pressure file: the stalled share of the
// last 10, 60 and 300 seconds, in percent, and the total stalled time in
// microseconds.
type PressureData struct {
	Avg10, Avg60, Avg300 float64
	Total                uint64
}

// Device is a block device's I/O of a cgroup.
type Device struct {
	Major, Minor                         uint64
	Name                                 string // "/dev/sda"; "" when unknown
	ReadBytes, WriteBytes, Reads, Writes uint64
}

// Interface is a network interface's counters.
type Interface struct {
	Name                                    string
	RxBytes, RxPackets, RxErrors, RxDropped uint64
	TxBytes, TxPackets, TxErrors, TxDropped uint64
}

// unlimited is the smallest value taken as "no limit" (v1 writes a
// page-rounded MaxInt64), as cAdvisor's specMemoryValue.
const unlimited = 1 << 62

// userHz is the unit of cpuacct.stat (USER_HZ).
const userHz = 100

// Read returns the stats of cgroup rel; processes says whether to count
// its processes, threads and descriptors (a walk of /proc/<pid>/fd).
func (d Dirs) Read(rel string, processes bool, now time.Time) (Stats, error) {
	s := Stats{Time: now}
	var err error
	if d.V2 {
		err = d.readV2(rel, &s)
	} else {
		err = d.readV1(rel, &s)
	}
	if err != nil {
		return s, err
	}
	cg2 := d.Dir("", rel) // v2's directory, a hybrid v1 host's unified one
	procsDir := d.Dir("cpu", rel)
	if d.V2 {
		procsDir = cg2
	}
	if cg2 != "" {
		s.CPUPressure = readPressure(filepath.Join(cg2, "cpu.pressure"))
		s.MemPressure = readPressure(filepath.Join(cg2, "memory.pressure"))
		s.IOPressure = readPressure(filepath.Join(cg2, "io.pressure"))
	}
	pids := readPids(filepath.Join(procsDir, "cgroup.procs"))
	if len(pids) > 0 {
		s.Pid = pids[0]
	}
	if processes {
		s.HaveProcesses = true
		s.Processes = uint64(len(pids))
		if s.Threads == 0 {
			s.Threads = uint64(len(readPids(filepath.Join(procsDir, tasksFile(d.V2)))))
		}
		for _, p := range pids {
			fds, socks := countFDs(filepath.Join(d.proc(), strconv.Itoa(p), "fd"))
			s.FDs += fds
			s.Sockets += socks
		}
		if len(pids) > 0 {
			s.OpenFilesSoft = openFilesSoft(filepath.Join(d.proc(), strconv.Itoa(pids[0]), "limits"))
		}
	}
	return s, nil
}

func tasksFile(v2 bool) string {
	if v2 {
		return "cgroup.threads"
	}
	return "tasks"
}

func (d Dirs) readV1(rel string, s *Stats) error {
	mem := d.Dir("memory", rel)
	cpu := d.Dir("cpu", rel)
	acct := d.Dir("cpuacct", rel)
	if _, err := os.Stat(mem); err != nil {
		if _, err2 := os.Stat(cpu); err2 != nil {
			return fmt.Errorf("cgroup %s: %w", rel, err)
		}
	}
	if v, ok := readUint(acct, "cpuacct.usage"); ok {
		s.CPUUsageNs, s.HaveCPU = v, true
		kv := readKV(filepath.Join(acct, "cpuacct.stat"))
		s.CPUUserNs = kv["user"] * (1e9 / userHz)
		s.CPUSystemNs = kv["system"] * (1e9 / userHz)
	}
	if kv := readKV(filepath.Join(cpu, "cpu.stat")); kv != nil {
		s.Periods, s.ThrottledPeriods, s.ThrottledNs, s.HaveThrottling = kv["nr_periods"], kv["nr_throttled"], kv["throttled_time"], true
	}
	if v, ok := readUint(cpu, "cpu.shares"); ok {
		s.CPUShares, s.HaveSpec = v, true
		s.CPUPeriod, _ = readUint(cpu, "cpu.cfs_period_us")
		if q, ok := readInt(cpu, "cpu.cfs_quota_us"); ok && q > 0 {
			s.CPUQuota = uint64(q)
		}
	}
	if v, ok := readUint(mem, "memory.usage_in_bytes"); ok {
		s.HaveMemory = true
		s.MemUsage = v
		s.MemMaxUsage, _ = readUint(mem, "memory.max_usage_in_bytes")
		s.MemFailcnt, _ = readUint(mem, "memory.failcnt")
		kv := readKV(filepath.Join(mem, "memory.stat"))
		s.MemCache, s.MemRSS, s.MemMappedFile, s.MemSwap = kv["total_cache"], kv["total_rss"], kv["total_mapped_file"], kv["total_swap"]
		s.PgFault, s.PgMajFault, s.HierPgFault, s.HierPgMajFault = kv["pgfault"], kv["pgmajfault"], kv["total_pgfault"], kv["total_pgmajfault"]
		s.MemWorkingSet = sat(v, kv["total_inactive_file"])
		s.OOMKills = readKV(filepath.Join(mem, "memory.oom_control"))["oom_kill"]
		l, _ := readUint(mem, "memory.limit_in_bytes")
		r, _ := readUint(mem, "memory.soft_limit_in_bytes")
		sw, _ := readUint(mem, "memory.memsw.limit_in_bytes")
		s.MemLimit, s.MemReservation, s.SwapLimit = limit(l), limit(r), limit(sw)
		s.HaveSpec = true
	}
	s.Blkio = d.blkioV1(d.Dir("blkio", rel))
	if p := d.Dir("pids", rel); p != "" {
		s.Threads, _ = readUint(p, "pids.current")
		s.ThreadsMax, _ = readUint(p, "pids.max") // "max": 0
	}
	return nil
}

func (d Dirs) readV2(rel string, s *Stats) error {
	dir := d.Dir("", rel)
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("cgroup %s: %w", rel, err)
	}
	if kv := readKV(filepath.Join(dir, "cpu.stat")); kv != nil {
		s.CPUUsageNs, s.CPUUserNs, s.CPUSystemNs, s.HaveCPU = kv["usage_usec"]*1000, kv["user_usec"]*1000, kv["system_usec"]*1000, true
		if _, ok := kv["nr_periods"]; ok {
			s.Periods, s.ThrottledPeriods, s.ThrottledNs, s.HaveThrottling = kv["nr_periods"], kv["nr_throttled"], kv["throttled_usec"]*1000, true
		}
	}
	if w, ok := readUint(dir, "cpu.weight"); ok {
		// cAdvisor's conversion back to v1 shares (runc's is the inverse)
		s.CPUShares, s.HaveSpec = 2+((w-1)*262142)/9999, true
		if b, err := os.ReadFile(filepath.Join(dir, "cpu.max")); err == nil {
			f := strings.Fields(string(b))
			if len(f) == 2 {
				s.CPUPeriod, _ = strconv.ParseUint(f[1], 10, 64)
				if q, err := strconv.ParseUint(f[0], 10, 64); err == nil {
					s.CPUQuota = q
				}
			}
		}
	}
	if v, ok := readUint(dir, "memory.current"); ok {
		s.HaveMemory, s.HaveSpec = true, true
		s.MemUsage = v
		s.MemMaxUsage, _ = readUint(dir, "memory.peak")
		kv := readKV(filepath.Join(dir, "memory.stat"))
		s.MemCache, s.MemRSS, s.MemMappedFile = kv["file"], kv["anon"], kv["file_mapped"]
		s.PgFault, s.PgMajFault = kv["pgfault"], kv["pgmajfault"]
		s.HierPgFault, s.HierPgMajFault = s.PgFault, s.PgMajFault
		s.MemSwap, _ = readUint(dir, "memory.swap.current")
		s.MemWorkingSet = sat(v, kv["inactive_file"])
		ev := readKV(filepath.Join(dir, "memory.events"))
		s.OOMKills, s.MemFailcnt = ev["oom_kill"], ev["max"]
		l, _ := readUint(dir, "memory.max") // "max": 0
		r, _ := readUint(dir, "memory.low")
		sw, _ := readUint(dir, "memory.swap.max")
		s.MemLimit, s.MemReservation, s.SwapLimit = limit(l), limit(r), limit(sw)
	}
	s.Blkio = d.ioV2(dir)
	s.Threads, _ = readUint(dir, "pids.current")
	s.ThreadsMax, _ = readUint(dir, "pids.max")
	return nil
}
