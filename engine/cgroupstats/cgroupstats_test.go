package cgroupstats

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// v1Dirs lays out a cgroup v1 tree under root: one directory per
// controller, as the host mounts them.
func v1Dirs(root string) Dirs {
	return Dirs{Dir: func(ctrl, rel string) string { return filepath.Join(root, ctrl, rel) }, Proc: filepath.Join(root, "proc")}
}

func TestReadV1(t *testing.T) {
	root := t.TempDir()
	d := v1Dirs(root)
	rel := "/kubepods/besteffort/podu/abc"
	write(t, d.Dir("cpuacct", rel), map[string]string{"cpuacct.usage": "2500000000\n", "cpuacct.stat": "user 150\nsystem 50\n"})
	write(t, d.Dir("cpu", rel), map[string]string{"cpu.stat": "nr_periods 10\nnr_throttled 3\nthrottled_time 7000\n",
		"cpu.shares": "2\n", "cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "-1\n", "cgroup.procs": "4242\n", "tasks": "4242\n4243\n"})
	write(t, d.Dir("memory", rel), map[string]string{"memory.usage_in_bytes": "10485760\n", "memory.max_usage_in_bytes": "20971520\n",
		"memory.failcnt": "0\n", "memory.limit_in_bytes": "83886080\n", "memory.soft_limit_in_bytes": "9223372036854771712\n",
		"memory.memsw.limit_in_bytes": "9223372036854771712\n", "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
		"memory.stat": "cache 100\nrss 200\npgfault 5\npgmajfault 1\ntotal_cache 4096\ntotal_rss 8192\ntotal_mapped_file 1024\ntotal_swap 0\ntotal_inactive_file 2097152\ntotal_pgfault 50\ntotal_pgmajfault 2\n"})
	write(t, d.Dir("blkio", rel), map[string]string{
		"blkio.throttle.io_service_bytes_recursive": "8:0 Read 4096\n8:0 Write 8192\n8:0 Total 12288\nTotal 12288\n",
		"blkio.throttle.io_serviced_recursive":      "8:0 Read 1\n8:0 Write 2\n8:0 Total 3\nTotal 3\n"})
	write(t, d.Dir("pids", rel), map[string]string{"pids.current": "2\n", "pids.max": "max\n"})
	fd := filepath.Join(d.Proc, "4242", "fd")
	write(t, fd, nil)
	os.Symlink("socket:[123]", filepath.Join(fd, "3"))
	os.Symlink("/dev/null", filepath.Join(fd, "0"))
	write(t, filepath.Join(d.Proc, "4242"), map[string]string{"limits": "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\n"})

	now := time.Unix(1000, 0)
	s, err := d.Read(rel, true, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"cpu usage", s.CPUUsageNs, 2.5e9}, {"user", s.CPUUserNs, 1.5e9}, {"system", s.CPUSystemNs, 0.5e9},
		{"periods", s.Periods, 10}, {"throttled", s.ThrottledPeriods, 3}, {"throttled ns", s.ThrottledNs, 7000},
		{"shares", s.CPUShares, 2}, {"period", s.CPUPeriod, 100000}, {"quota (none)", s.CPUQuota, 0},
		{"usage", s.MemUsage, 10 << 20}, {"working set", s.MemWorkingSet, 8 << 20}, {"rss (total_rss)", s.MemRSS, 8192},
		{"cache (total_cache)", s.MemCache, 4096}, {"mapped", s.MemMappedFile, 1024}, {"max usage", s.MemMaxUsage, 20 << 20},
		{"pgfault", s.PgFault, 5}, {"hier pgfault", s.HierPgFault, 50}, {"pgmajfault", s.PgMajFault, 1}, {"oom kills", s.OOMKills, 1},
		{"limit", s.MemLimit, 80 << 20}, {"reservation (unlimited)", s.MemReservation, 0}, {"swap limit (unlimited)", s.SwapLimit, 0},
		{"processes", s.Processes, 1}, {"threads (pids.current)", s.Threads, 2}, {"threads max (max)", s.ThreadsMax, 0},
		{"fds", s.FDs, 2}, {"sockets", s.Sockets, 1}, {"open files", s.OpenFilesSoft, 1048576},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if !s.HaveCPU || !s.HaveMemory || !s.HaveSpec || !s.HaveThrottling || !s.HaveProcesses || s.Pid != 4242 || !s.Time.Equal(now) {
		t.Errorf("flags: %+v", s)
	}
	if len(s.Blkio) != 1 || s.Blkio[0].Major != 8 || s.Blkio[0].ReadBytes != 4096 || s.Blkio[0].WriteBytes != 8192 || s.Blkio[0].Reads != 1 || s.Blkio[0].Writes != 2 {
		t.Errorf("blkio %+v", s.Blkio)
	}
	if _, err := d.Read("/gone", false, now); err == nil {
		t.Error("a cgroup that is not there read without error")
	}
}

func TestReadV2(t *testing.T) {
	root := t.TempDir()
	d := Dirs{Dir: func(_, rel string) string { return filepath.Join(root, rel) }, V2: true, Proc: filepath.Join(root, "proc")}
	rel := "/kubepods/burstable/podu/abc"
	write(t, d.Dir("", rel), map[string]string{
		"cpu.stat":   "usage_usec 3000000\nuser_usec 2000000\nsystem_usec 1000000\nnr_periods 4\nnr_throttled 1\nthrottled_usec 5\n",
		"cpu.weight": "1\n", "cpu.max": "50000 100000\n",
		"memory.current": "1048576\n", "memory.max": "max\n", "memory.low": "0\n", "memory.swap.max": "max\n", "memory.swap.current": "0\n",
		"memory.stat":   "anon 4096\nfile 8192\nfile_mapped 512\ninactive_file 24576\npgfault 9\npgmajfault 3\n",
		"memory.events": "low 0\nhigh 0\nmax 2\noom 0\noom_kill 0\n",
		"io.stat":       "259:0 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0\n",
		"pids.current":  "3\n", "pids.max": "1000\n", "cgroup.procs": "", "cgroup.threads": ""})
	s, err := d.Read(rel, true, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUUsageNs != 3e9 || s.CPUUserNs != 2e9 || s.CPUShares != 2 || s.CPUQuota != 50000 || s.CPUPeriod != 100000 || s.ThrottledNs != 5000 {
		t.Errorf("cpu %+v", s)
	}
	if s.MemUsage != 1<<20 || s.MemWorkingSet != 1<<20-24576 || s.MemRSS != 4096 || s.MemCache != 8192 || s.MemLimit != 0 || s.MemFailcnt != 2 || s.PgFault != 9 {
		t.Errorf("memory %+v", s)
	}
	if len(s.Blkio) != 1 || s.Blkio[0].Major != 259 || s.Blkio[0].WriteBytes != 20 || s.Blkio[0].Writes != 2 {
		t.Errorf("io %+v", s.Blkio)
	}
	if s.Threads != 3 || s.ThreadsMax != 1000 || s.Processes != 0 || s.Pid != 0 {
		t.Errorf("pids %+v", s)
	}
}

func TestParseNetDev(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "dev")
	write(t, dir, map[string]string{"dev": `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0:  123456     100    1    2    0     0          0         0    65432      50    3    4    0     0       0          0
vethab12:     5       1    0    0    0     0          0         0        5       1    0    0    0     0       0          0
`})
	ifs, err := ParseNetDev(p)
	if err != nil {
		t.Fatal(err)
	}
	want := Interface{Name: "eth0", RxBytes: 123456, RxPackets: 100, RxErrors: 1, RxDropped: 2, TxBytes: 65432, TxPackets: 50, TxErrors: 3, TxDropped: 4}
	if len(ifs) != 1 || ifs[0] != want {
		t.Errorf("interfaces %+v, want only %+v (lo and veth left out, as cAdvisor leaves them)", ifs, want)
	}
}

func TestFinder(t *testing.T) {
	root := t.TempDir()
	d := v1Dirs(root)
	ids := []string{"aaa111", "bbb222"}
	os.MkdirAll(d.Dir("memory", "/kubepods/podu/"+ids[0]), 0o755)
	os.MkdirAll(d.Dir("memory", "/system.slice/cri-containerd-"+ids[1]+".scope"), 0o755)
	f := &Finder{Dirs: d}
	got := f.Find(append(ids, "ccc333"))
	if got[ids[0]] != "/kubepods/podu/"+ids[0] || got[ids[1]] != "/system.slice/cri-containerd-"+ids[1]+".scope" || len(got) != 2 {
		t.Errorf("found %v", got)
	}
	// kept: found again without the directory
	os.RemoveAll(d.Dir("memory", "/kubepods"))
	if got := f.Find(ids[:1]); got[ids[0]] == "" {
		t.Error("a found cgroup was not kept")
	}
	f.Prune(map[string]bool{})
	if got := f.Find(ids[:1]); len(got) != 0 {
		t.Errorf("after Prune and removal: %v", got)
	}
}

// TestReadPressure: a cgroup's PSI is read from its cgroup2 directory (on a
// v1 host the hybrid mount's); a kernel that writes only "some" leaves Full
// zero, and a resource without a pressure file has none.
func TestReadPressure(t *testing.T) {
	root := t.TempDir()
	d := Dirs{Dir: func(ctrl, rel string) string {
		if ctrl == "" {
			return filepath.Join(root, "unified", rel)
		}
		return filepath.Join(root, ctrl, rel)
	}, Proc: filepath.Join(root, "proc")}
	rel := "/kubepods/besteffort/podu"
	write(t, d.Dir("memory", rel), map[string]string{"memory.usage_in_bytes": "4096\n"})
	write(t, d.Dir("", rel), map[string]string{
		"cpu.pressure": "some avg10=1.50 avg60=0.25 avg300=0.05 total=123456\n",
		"io.pressure":  "some avg10=10.46 avg60=3.21 avg300=0.79 total=2710375\nfull avg10=10.28 avg60=3.10 avg300=0.75 total=2579116\n",
	})
	s, err := d.Read(rel, false, time.Unix(1000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUPressure == nil || *s.CPUPressure != (Pressure{Some: PressureData{1.5, 0.25, 0.05, 123456}}) {
		t.Errorf("cpu pressure %+v, want some 1.5/0.25/0.05 total 123456 and full zero", s.CPUPressure)
	}
	want := Pressure{Some: PressureData{10.46, 3.21, 0.79, 2710375}, Full: PressureData{10.28, 3.10, 0.75, 2579116}}
	if s.IOPressure == nil || *s.IOPressure != want {
		t.Errorf("io pressure %+v, want %+v", s.IOPressure, want)
	}
	if s.MemPressure != nil {
		t.Errorf("memory pressure %+v without a memory.pressure file", s.MemPressure)
	}
	write(t, d.Dir("", rel), map[string]string{"memory.pressure": "garbage\n"})
	if s, _ := d.Read(rel, false, time.Unix(1000, 0)); s.MemPressure != nil {
		t.Errorf("memory pressure %+v from a file with neither line", s.MemPressure)
	}
}
