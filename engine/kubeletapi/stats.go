package kubeletapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/cgroups"
)

// nodeCPU keeps the previous reading of the node's CPU time, for the rate.
type nodeCPU struct {
	mu         sync.Mutex
	lastTotal  uint64 // core-nanoseconds
	lastSample time.Time
}

// userHz is the unit of /proc/stat (USER_HZ, 100 on Linux).
const userHz = 100

// readNodeCPU returns the node's busy CPU time in core-nanoseconds from
// /proc/stat (user, nice, system, irq, softirq, steal).
func readNodeCPU() (uint64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		busy += n
	}
	return busy * (1e9 / userHz), nil
}

// bootTime returns the node's boot time from /proc/stat's btime.
func bootTime() time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Unix(n, 0)
		}
	}
	return time.Time{}
}

func u64(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	n := v.Value
	return &n
}

func cpuStats(c *runtimeapi.CpuUsage) *statsapi.CPUStats {
	if c == nil {
		return nil
	}
	return &statsapi.CPUStats{Time: metav1.NewTime(time.Unix(0, c.Timestamp)),
		UsageNanoCores: u64(c.UsageNanoCores), UsageCoreNanoSeconds: u64(c.UsageCoreNanoSeconds)}
}

func memStats(m *runtimeapi.MemoryUsage) *statsapi.MemoryStats {
	if m == nil {
		return nil
	}
	return &statsapi.MemoryStats{Time: metav1.NewTime(time.Unix(0, m.Timestamp)),
		AvailableBytes: u64(m.AvailableBytes), UsageBytes: u64(m.UsageBytes), WorkingSetBytes: u64(m.WorkingSetBytes),
		RSSBytes: u64(m.RssBytes), PageFaults: u64(m.PageFaults), MajorPageFaults: u64(m.MajorPageFaults)}
}

// summary is /stats/summary of the current housekeeping pass (StatsCache),
// built once per pass as kubelet's CRI stats provider builds it:
//   - the node: CPU from the root cgroup (else /proc/stat), memory from the
//     root cgroup (usage, working set, RSS, page faults; else
//     /proc/meminfo), the host's network interfaces, the root dir's file
//     system, the runtime's image file system (CRI ImageFsInfo; the
//     container file system is the same, as containerd 1.6 has no
//     separate one), the process limit and count, and the system
//     containers speclet can read: "pods" (the kubepods cgroup) and
//     "kubelet" (speclet's own cgroup, when it has one);
//   - each ready sandbox's pod: CPU and memory of the pod's cgroup (else
//     ListPodSandboxStats, else the sum of its containers'), its network
//     namespace's interfaces, its processes (its containers' summed),
//     its volumes' usage (every volume directory but host paths), its
//     ephemeral storage (the containers' writable layers and logs plus
//     the volumes);
//   - each running container: CPU and memory from ListContainerStats, the
//     fields the CRI leaves out from its cgroup, the writable layer
//     (rootfs) with the image file system's size, and its log directory.
//
// Left out, as speclet cannot measure them: PSI (cgroup v1 has none; on v2
// it is not read yet), swap, accelerators, user-defined metrics, the
// "runtime" and "misc" system containers (speclet does not know the
// runtime's cgroup), volume health and PVC references.
func (a *API) summary(ctx context.Context) (*statsapi.Summary, error) {
	var s statsapi.Summary
	err := a.withPass(ctx, func(p *pass) {
		if p.summary == nil {
			p.summary = a.buildSummary(ctx, p)
		}
		s = *p.summary
	})
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// buildSummary is the summary of pass p; the node's parts the pass does
// not hold (file systems, limits, the system containers) are read now.
func (a *API) buildSummary(ctx context.Context, ps *pass) *statsapi.Summary {
	now := ps.at
	s := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: a.c.NodeName, StartTime: metav1.NewTime(bootTime())}}
	d := a.dirs
	root := ps.cgroup("/")
	if busy, err := readNodeCPU(); err == nil {
		if root != nil && root.HaveCPU {
			busy = root.CPUUsageNs
		}
		cpu := &statsapi.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: &busy}
		nc := &a.stats.cpu
		nc.mu.Lock()
		if !nc.lastSample.IsZero() && busy >= nc.lastTotal && now.After(nc.lastSample) {
			rate := uint64(float64(busy-nc.lastTotal) / now.Sub(nc.lastSample).Seconds())
			cpu.UsageNanoCores = &rate
		}
		nc.lastTotal, nc.lastSample = busy, now
		nc.mu.Unlock()
		if root != nil {
			cpu.PSI = psiStats(root.CPUPressure)
		}
		s.Node.CPU = cpu
	}
	if m, err := cgroups.Meminfo(""); err == nil && m["MemTotal"] > 0 {
		total, avail := m["MemTotal"], m["MemAvailable"]
		ws := total - avail
		mem := &statsapi.MemoryStats{Time: metav1.NewTime(now), AvailableBytes: &avail, UsageBytes: &ws, WorkingSetBytes: &ws}
		if root != nil && root.HaveMemory && root.MemUsage > 0 {
			// the root cgroup, as cAdvisor's root container
			mem = cgroupMemory(*root)
			mem.AvailableBytes = ptr(sat(total, root.MemWorkingSet))
		}
		s.Node.Memory = mem
	}
	if root != nil {
		s.Node.IO = cgroupIO(*root)
	}
	if ifs, ok := ps.net["/"]; ok {
		s.Node.Network = networkStats(ifs, now)
	}
	if a.c.RootDir != "" {
		s.Node.Fs = statfsStats(a.c.RootDir, now)
	}
	imageFs, imageMount := a.imageFsStats(ctx, now)
	if imageFs != nil {
		s.Node.Runtime = &statsapi.RuntimeStats{ImageFs: imageFs, ContainerFs: imageFs}
	}
	s.Node.Rlimit = rlimitStats(now)
	if d != nil {
		s.Node.SystemContainers = a.systemContainers(now)
	}

	ls := ps.ls
	byCID := map[string]*runtimeapi.ContainerStats{}
	for _, st := range ls.cstats {
		byCID[st.GetAttributes().GetId()] = st
	}
	// the sandboxes' own stats: only the summary's (the series have the
	// pod cgroups')
	sbStats := map[string]*runtimeapi.PodSandboxStats{}
	if st, err := a.c.Runtime.ListPodSandboxStats(ctx, nil); err == nil {
		for _, st := range st {
			sbStats[st.GetAttributes().GetId()] = st
		}
	} else if !cri.IsUnimplemented(err) {
		a.c.Log.Debug("kubelet API: ListPodSandboxStats", "err", err)
	}
	pods := map[string]*statsapi.PodStats{}
	for _, sb := range ls.sbs {
		uid := a.podUID(sb.Labels)
		if uid == "" {
			continue
		}
		p := &statsapi.PodStats{PodRef: statsapi.PodReference{Name: a.podName(sb.Labels), Namespace: a.podNamespace(sb.Labels), UID: uid},
			StartTime: metav1.NewTime(time.Unix(0, sb.CreatedAt)), Containers: []statsapi.ContainerStats{}}
		if st := sbStats[sb.Id]; st != nil && st.Linux != nil {
			p.CPU, p.Memory = cpuStats(st.Linux.Cpu), memStats(st.Linux.Memory)
		}
		if pc := podCgroup(ls.where[sb.Id], uid); pc != "" {
			if st := ps.cgroup(pc); st != nil {
				p.CPU, p.Memory, p.IO = a.cgroupCPU(pc, *st), cgroupMemory(*st), cgroupIO(*st)
			}
		}
		if ifs, ok := ps.net[ls.where[sb.Id]]; ok {
			p.Network = networkStats(ifs, now)
		}
		p.VolumeStats = a.volumeStats(uid, now)
		pods[sb.Id] = p
	}
	procs := map[string]uint64{}
	for _, c := range ls.cs {
		p := pods[c.PodSandboxId]
		if p == nil {
			continue
		}
		st := byCID[c.Id]
		name := a.containerName(c.Labels)
		cst := statsapi.ContainerStats{Name: name, StartTime: metav1.NewTime(time.Unix(0, c.CreatedAt))}
		cg := ps.reading(c.Id)
		if st != nil {
			cst.CPU, cst.Memory = cpuStats(st.Cpu), memStats(st.Memory)
			if wl := st.WritableLayer; wl != nil {
				mp := wl.GetFsId().GetMountpoint()
				if mp == "" {
					mp = imageMount
				}
				rootfs := statfsStats(mp, time.Unix(0, wl.Timestamp))
				if rootfs == nil {
					rootfs = &statsapi.FsStats{Time: metav1.NewTime(time.Unix(0, wl.Timestamp))}
				}
				rootfs.UsedBytes, rootfs.InodesUsed = u64(wl.UsedBytes), u64(wl.InodesUsed)
				cst.Rootfs = rootfs
			}
		}
		if cg != nil {
			if cst.CPU == nil {
				cst.CPU = a.cgroupCPU(ls.where[c.Id], *cg)
			} else if r := a.cgroupCPU(ls.where[c.Id], *cg); r != nil {
				if cst.CPU.UsageNanoCores == nil {
					cst.CPU.UsageNanoCores = r.UsageNanoCores
				}
				if cst.CPU.PSI == nil {
					cst.CPU.PSI = r.PSI
				}
			}
			cst.Memory = fillMemory(cst.Memory, cgroupMemory(*cg))
			cst.IO = cgroupIO(*cg)
			procs[c.PodSandboxId] += cg.Processes
		}
		cst.Logs = a.logStats(p.PodRef.Namespace, p.PodRef.Name, p.PodRef.UID, name, now)
		p.Containers = append(p.Containers, cst)
	}
	for id, p := range pods {
		sort.Slice(p.Containers, func(i, j int) bool { return p.Containers[i].Name < p.Containers[j].Name })
		if p.CPU == nil {
			p.CPU, p.Memory = sumContainers(p.Containers, now)
		}
		// The pod's process count is its containers' summed, as kubelet's
		// CRI stats provider merges them: the pod's own cgroup holds none
		// (its processes are in the containers' cgroups under it).
		if d != nil {
			p.ProcessStats = &statsapi.ProcessStats{ProcessCount: ptr(procs[id])}
		}
		p.EphemeralStorage = ephemeral(p, now)
		s.Pods = append(s.Pods, *p)
	}
	a.stats.rates.prune(now)
	a.stats.du.prune(now)
	sort.Slice(s.Pods, func(i, j int) bool {
		return s.Pods[i].PodRef.Namespace+"/"+s.Pods[i].PodRef.Name < s.Pods[j].PodRef.Namespace+"/"+s.Pods[j].PodRef.Name
	})
	if s.Pods == nil {
		s.Pods = []statsapi.PodStats{}
	}
	return s
}

// systemContainers are "pods" (the kubepods cgroup), "kubelet" (its
// configured cgroup, else speclet's own when it is not the root) and the
// "runtime" and "misc" cgroups configured, where they exist.
func (a *API) systemContainers(now time.Time) []statsapi.ContainerStats {
	var out []statsapi.ContainerStats
	add := func(name, rel string) {
		st, err := a.dirs.Read(rel, false, now)
		if err != nil || !st.HaveCPU {
			return
		}
		start := time.Time{}
		if fi, err := os.Stat(a.dirs.Dir("cpu", rel)); err == nil {
			start = fi.ModTime()
		}
		out = append(out, statsapi.ContainerStats{Name: name, StartTime: metav1.NewTime(start),
			CPU: a.cgroupCPU("system:"+rel, st), Memory: cgroupMemory(st), IO: cgroupIO(st)})
	}
	if rel := a.c.SystemCgroups[statsapi.SystemContainerKubelet]; rel != "" {
		add(statsapi.SystemContainerKubelet, rel)
	} else if own := ownCgroup(a.dirs.V2); own != "" && own != "/" {
		add(statsapi.SystemContainerKubelet, own)
	}
	for _, name := range []string{statsapi.SystemContainerRuntime, statsapi.SystemContainerMisc} {
		if rel := a.c.SystemCgroups[name]; rel != "" {
			add(name, rel)
		}
	}
	if _, err := os.Stat(a.dirs.Dir("memory", "/"+cgroups.KubePods)); err == nil {
		add(statsapi.SystemContainerPods, "/"+cgroups.KubePods)
	}
	return out
}

// sumContainers is a pod's CPU and memory as the sum of its containers'.
func sumContainers(cs []statsapi.ContainerStats, now time.Time) (*statsapi.CPUStats, *statsapi.MemoryStats) {
	var cpuNs, cores, ws, usage uint64
	var haveCPU, haveCores, haveMem bool
	for _, c := range cs {
		if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
			cpuNs += *c.CPU.UsageCoreNanoSeconds
			haveCPU = true
		}
		if c.CPU != nil && c.CPU.UsageNanoCores != nil {
			cores += *c.CPU.UsageNanoCores
			haveCores = true
		}
		if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
			ws += *c.Memory.WorkingSetBytes
			haveMem = true
			if c.Memory.UsageBytes != nil {
				usage += *c.Memory.UsageBytes
			}
		}
	}
	var cpu *statsapi.CPUStats
	if haveCPU {
		cpu = &statsapi.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: &cpuNs}
		if haveCores {
			cpu.UsageNanoCores = &cores
		}
	}
	var mem *statsapi.MemoryStats
	if haveMem {
		mem = &statsapi.MemoryStats{Time: metav1.NewTime(now), WorkingSetBytes: &ws, UsageBytes: &usage}
	}
	return cpu, mem
}

func (a *API) statsSummary(w http.ResponseWriter, r *http.Request) {
	s, err := a.summary(r.Context())
	if err != nil {
		httpError(w, http.StatusInternalServerError, "stats summary: %v", err)
		return
	}
	if r.URL.Query().Get("only_cpu_and_memory") == "true" { // s is a copy: the pass's summary stays whole
		s.Node = statsapi.NodeStats{NodeName: s.Node.NodeName, StartTime: s.Node.StartTime, CPU: s.Node.CPU, Memory: s.Node.Memory}
	}
	writeJSON(w, s)
}
