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

	"golang.org/x/sys/unix"
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

// summary builds /stats/summary: the node from /proc and the root dir's
// file system, the pods and their containers from the CRI (ListPodSandbox,
// ListContainers, ListContainerStats, ListPodSandboxStats when the runtime
// has it; otherwise a pod's CPU and memory are the sums of its containers').
func (a *API) summary(ctx context.Context) (*statsapi.Summary, error) {
	now := a.c.Now()
	s := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: a.c.NodeName, StartTime: metav1.NewTime(bootTime())}}
	if busy, err := readNodeCPU(); err == nil {
		cpu := &statsapi.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: &busy}
		a.cpu.mu.Lock()
		if !a.cpu.lastSample.IsZero() && busy >= a.cpu.lastTotal && now.After(a.cpu.lastSample) {
			rate := uint64(float64(busy-a.cpu.lastTotal) / now.Sub(a.cpu.lastSample).Seconds())
			cpu.UsageNanoCores = &rate
		}
		a.cpu.lastTotal, a.cpu.lastSample = busy, now
		a.cpu.mu.Unlock()
		s.Node.CPU = cpu
	}
	if m, err := cgroups.Meminfo(""); err == nil && m["MemTotal"] > 0 {
		total, avail := m["MemTotal"], m["MemAvailable"]
		ws := total - avail
		s.Node.Memory = &statsapi.MemoryStats{Time: metav1.NewTime(now), AvailableBytes: &avail, UsageBytes: &ws, WorkingSetBytes: &ws}
	}
	if a.c.RootDir != "" {
		var st unix.Statfs_t
		if err := unix.Statfs(a.c.RootDir, &st); err == nil {
			capacity, avail := st.Blocks*uint64(st.Bsize), st.Bavail*uint64(st.Bsize)
			used := capacity - st.Bfree*uint64(st.Bsize)
			s.Node.Fs = &statsapi.FsStats{Time: metav1.NewTime(now), CapacityBytes: &capacity, AvailableBytes: &avail, UsedBytes: &used,
				Inodes: &st.Files, InodesFree: &st.Ffree}
		}
	}

	l := a.c.Labels
	sbs, err := a.c.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	cs, err := a.c.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	cstats, err := a.c.Runtime.ListContainerStats(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list container stats: %w", err)
	}
	byCID := map[string]*runtimeapi.ContainerStats{}
	for _, st := range cstats {
		byCID[st.GetAttributes().GetId()] = st
	}
	sbStats := map[string]*runtimeapi.PodSandboxStats{}
	if ps, err := a.c.Runtime.ListPodSandboxStats(ctx, nil); err == nil {
		for _, st := range ps {
			sbStats[st.GetAttributes().GetId()] = st
		}
	} else if !cri.IsUnimplemented(err) {
		a.c.Log.Debug("kubelet API: ListPodSandboxStats", "err", err)
	}
	pods := map[string]*statsapi.PodStats{}
	for _, sb := range sbs {
		uid := sb.Labels[l.PodUID]
		if uid == "" {
			continue
		}
		p := &statsapi.PodStats{PodRef: statsapi.PodReference{Name: sb.Labels[l.PodName], Namespace: sb.Labels[l.PodNamespace], UID: uid},
			StartTime: metav1.NewTime(time.Unix(0, sb.CreatedAt)), Containers: []statsapi.ContainerStats{}}
		if st := sbStats[sb.Id]; st != nil && st.Linux != nil {
			p.CPU, p.Memory = cpuStats(st.Linux.Cpu), memStats(st.Linux.Memory)
		}
		pods[sb.Id] = p
	}
	for _, c := range cs {
		p := pods[c.PodSandboxId]
		if p == nil {
			continue
		}
		st := byCID[c.Id]
		cst := statsapi.ContainerStats{Name: c.Labels[l.ContainerName], StartTime: metav1.NewTime(time.Unix(0, c.CreatedAt))}
		if st != nil {
			cst.CPU, cst.Memory = cpuStats(st.Cpu), memStats(st.Memory)
			if wl := st.WritableLayer; wl != nil {
				cst.Rootfs = &statsapi.FsStats{Time: metav1.NewTime(time.Unix(0, wl.Timestamp)), UsedBytes: u64(wl.UsedBytes), InodesUsed: u64(wl.InodesUsed)}
			}
		}
		p.Containers = append(p.Containers, cst)
	}
	for _, p := range pods {
		sort.Slice(p.Containers, func(i, j int) bool { return p.Containers[i].Name < p.Containers[j].Name })
		if p.CPU == nil {
			p.CPU, p.Memory = sumContainers(p.Containers, now)
		}
		s.Pods = append(s.Pods, *p)
	}
	sort.Slice(s.Pods, func(i, j int) bool {
		return s.Pods[i].PodRef.Namespace+"/"+s.Pods[i].PodRef.Name < s.Pods[j].PodRef.Namespace+"/"+s.Pods[j].PodRef.Name
	})
	if s.Pods == nil {
		s.Pods = []statsapi.PodStats{}
	}
	return s, nil
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
	if r.URL.Query().Get("only_cpu_and_memory") == "true" {
		s.Node = statsapi.NodeStats{NodeName: s.Node.NodeName, StartTime: s.Node.StartTime, CPU: s.Node.CPU, Memory: s.Node.Memory}
	}
	writeJSON(w, s)
}

// metricsResource serves /metrics/resource in the Prometheus text format
// metrics-server reads: node, pod and container CPU seconds and memory
// working set, container start times, each sample with its time.
func (a *API) metricsResource(w http.ResponseWriter, r *http.Request) {
	s, err := a.summary(r.Context())
	var b strings.Builder
	scrapeErr := 0
	if err != nil {
		scrapeErr = 1
		s = &statsapi.Summary{}
	}
	ms := func(t metav1.Time) int64 { return t.UnixMilli() }
	help := func(name, typ, text string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, typ)
	}
	help("container_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the container in core-seconds")
	for _, p := range s.Pods {
		for _, c := range p.Containers {
			if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
				fmt.Fprintf(&b, "container_cpu_usage_seconds_total{container=%q,namespace=%q,pod=%q} %g %d\n", c.Name, p.PodRef.Namespace, p.PodRef.Name,
					float64(*c.CPU.UsageCoreNanoSeconds)/1e9, ms(c.CPU.Time))
			}
		}
	}
	help("container_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the container in bytes")
	for _, p := range s.Pods {
		for _, c := range p.Containers {
			if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
				fmt.Fprintf(&b, "container_memory_working_set_bytes{container=%q,namespace=%q,pod=%q} %d %d\n", c.Name, p.PodRef.Namespace, p.PodRef.Name,
					*c.Memory.WorkingSetBytes, ms(c.Memory.Time))
			}
		}
	}
	help("container_start_time_seconds", "gauge", "[STABLE] Start time of the container since unix epoch in seconds")
	for _, p := range s.Pods {
		for _, c := range p.Containers {
			fmt.Fprintf(&b, "container_start_time_seconds{container=%q,namespace=%q,pod=%q} %d\n", c.Name, p.PodRef.Namespace, p.PodRef.Name, c.StartTime.Unix())
		}
	}
	help("node_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the node in core-seconds")
	if c := s.Node.CPU; c != nil && c.UsageCoreNanoSeconds != nil {
		fmt.Fprintf(&b, "node_cpu_usage_seconds_total %g %d\n", float64(*c.UsageCoreNanoSeconds)/1e9, ms(c.Time))
	}
	help("node_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the node in bytes")
	if m := s.Node.Memory; m != nil && m.WorkingSetBytes != nil {
		fmt.Fprintf(&b, "node_memory_working_set_bytes %d %d\n", *m.WorkingSetBytes, ms(m.Time))
	}
	help("pod_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds")
	for _, p := range s.Pods {
		if p.CPU != nil && p.CPU.UsageCoreNanoSeconds != nil {
			fmt.Fprintf(&b, "pod_cpu_usage_seconds_total{namespace=%q,pod=%q} %g %d\n", p.PodRef.Namespace, p.PodRef.Name, float64(*p.CPU.UsageCoreNanoSeconds)/1e9, ms(p.CPU.Time))
		}
	}
	help("pod_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the pod in bytes")
	for _, p := range s.Pods {
		if p.Memory != nil && p.Memory.WorkingSetBytes != nil {
			fmt.Fprintf(&b, "pod_memory_working_set_bytes{namespace=%q,pod=%q} %d %d\n", p.PodRef.Namespace, p.PodRef.Name, *p.Memory.WorkingSetBytes, ms(p.Memory.Time))
		}
	}
	help("resource_scrape_error", "gauge", "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise")
	fmt.Fprintf(&b, "resource_scrape_error %d\n", scrapeErr)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}
