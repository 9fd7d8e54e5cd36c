package kubeletapi

import (
	"errors"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/cgroups"
	"github.com/speclet/speclet/engine/cgroupstats"
)

// /metrics/cadvisor: cAdvisor's series with cAdvisor's names, labels
// (container, id, image, name, namespace, pod, and the series' own:
// cpu, interface, device, failure_type, scope, ulimit, ...) and sample
// timestamps, for the metric set kubelet v1.34 enables (CPU, memory, CPU
// load, disk I/O, disk usage, network, processes, OOM events).
//
// Where they come from: the cgroup files cAdvisor itself reads
// (engine/cgroupstats) for the node's root cgroup "/", each pod's cgroup
// (container "", name "") and each of its containers' (the sandbox's as
// container "POD", with the pod's network interfaces), found by container
// ID; the writable layer's usage from the CRI's ListContainerStats; the
// start times from the CRI. Embedding github.com/google/cadvisor would
// watch every cgroup of the host (inotify) and keep a history in memory
// for the whole process life; CRI's ListPodSandboxMetrics, kubelet's other
// source, is not in containerd 1.6. Reading the files on a scrape costs
// only the pods' cgroups (docs/performance.md has the numbers).
//
// Left out, as kubelet's cAdvisor on containerd leaves them out or because
// speclet cannot measure them: container_fs_inodes_*, container_fs_limit_bytes
// and the fs I/O time series (cAdvisor has none for containerd's
// snapshots either), per-CPU usage (kubelet disables it), and the
// cgroups speclet does not own (system.slice and the like; cAdvisor
// reports every cgroup of the host).
// container_cpu_load_average_10s and container_tasks_state are 0, as
// kubelet's are: its cAdvisor runs without the netlink load reader.

// cgroupEntry is one cgroup's series: its labels and its reading.
type cgroupEntry struct {
	id, name, image, pod, namespace, container string
	st                                         cgroupstats.Stats
	start                                      time.Time
	fs                                         *runtimeapi.FilesystemUsage // the container's writable layer
	net                                        []cgroupstats.Interface
	haveNet                                    bool
}

// cadvisorDirs returns the cgroup directories the API reads: c.Cgroups, or
// the host's (/sys/fs/cgroup) when that is nil; nil when there is none.
func cadvisorDirs(c *cgroupstats.Dirs) *cgroupstats.Dirs {
	if c != nil {
		return c
	}
	m, err := cgroups.New(cgroups.Options{})
	if err != nil {
		return nil
	}
	return &cgroupstats.Dirs{Dir: m.Dir, V2: m.V2()}
}

// podCgroup is the pod's cgroup: the sandbox's parent when it is the
// pod's own (pod<uid> on cgroupfs, ...-pod<uid_>.slice on systemd); ""
// when the sandbox has none of its own.
func podCgroup(sbPath, uid string) string {
	if sbPath == "" {
		return ""
	}
	if parent := path.Dir(sbPath); isPodCgroup(parent, uid) {
		return parent
	}
	return ""
}

// buildEntries are the series' cgroups of pass ps.
func (a *API) buildEntries(ps *pass) []cgroupEntry {
	var out []cgroupEntry
	if st := ps.cgroup("/"); st != nil {
		e := cgroupEntry{id: "/", st: *st, start: bootTime()}
		e.net, e.haveNet = ps.net["/"]
		out = append(out, e)
	}
	ls := ps.ls
	where := ls.where
	fsOf := map[string]*runtimeapi.FilesystemUsage{}
	for _, st := range ls.cstats {
		fsOf[st.GetAttributes().GetId()] = st.WritableLayer
	}
	bySandbox := map[string][]*runtimeapi.Container{}
	for _, c := range ls.cs {
		bySandbox[c.PodSandboxId] = append(bySandbox[c.PodSandboxId], c)
	}
	images := a.specImages()
	for _, sb := range ls.sbs {
		uid := a.podUID(sb.Labels)
		if uid == "" {
			continue
		}
		pod, ns := a.podName(sb.Labels), a.podNamespace(sb.Labels)
		sbPath, ok := where[sb.Id]
		if !ok {
			continue
		}
		if parent := podCgroup(sbPath, uid); parent != "" {
			if st := ps.cgroup(parent); st != nil {
				out = append(out, cgroupEntry{id: parent, pod: pod, namespace: ns, st: *st, start: time.Unix(0, sb.CreatedAt)})
			}
		}
		st := ps.cgroup(sbPath)
		if st == nil {
			continue
		}
		e := cgroupEntry{id: sbPath, name: sb.Id, pod: pod, namespace: ns, container: "POD", st: *st, start: time.Unix(0, sb.CreatedAt)}
		e.net, e.haveNet = ps.net[sbPath]
		out = append(out, e)
		for _, c := range bySandbox[sb.Id] {
			st := ps.reading(c.Id)
			if st == nil {
				continue
			}
			name := a.containerName(c.Labels)
			image := images[uid+"/"+name]
			if image == "" {
				image = c.GetImage().GetImage()
			}
			out = append(out, cgroupEntry{id: where[c.Id], name: c.Id, image: image, pod: pod, namespace: ns,
				container: name, st: *st, start: time.Unix(0, c.CreatedAt), fs: fsOf[c.Id]})
		}
	}
	return out
}

// specImages is the image of each container of the node's pods, by
// "<pod uid>/<container>": the image label is the name the pod asked for,
// as cAdvisor's is the name containerd keeps (the CRI lists the image's
// ID).
func (a *API) specImages() map[string]string {
	out := map[string]string{}
	for _, p := range a.c.Host.Pods() {
		for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for _, c := range cs {
				out[string(p.UID)+"/"+c.Name] = c.Image
			}
		}
		for _, c := range p.Spec.EphemeralContainers {
			out[string(p.UID)+"/"+c.Name] = c.Image
		}
	}
	return out
}

func isPodCgroup(p, uid string) bool {
	b := path.Base(p)
	return b == "pod"+uid || strings.Contains(b, "pod"+strings.ReplaceAll(uid, "-", "_"))
}

// cadvisorCollector collects /metrics/cadvisor of one pass's cgroups
// (es; err: why there are none).
type cadvisorCollector struct {
	a   *API
	es  []cgroupEntry
	err error
}

func (c cadvisorCollector) Describe(ch chan<- *prometheus.Desc) {} // unchecked: the series vary by cgroup

var cadvisorLabels = []string{"container", "id", "image", "name", "namespace", "pod"}

func (c cadvisorCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	descs := map[string]*prometheus.Desc{}
	emit := func(e *cgroupEntry, name, help string, t prometheus.ValueType, v float64, extra ...string) {
		d, ok := descs[name]
		if !ok {
			var names []string
			for i := 0; i < len(extra); i += 2 {
				names = append(names, extra[i])
			}
			d = prometheus.NewDesc(name, help, append(names, cadvisorLabels...), nil)
			descs[name] = d
		}
		vals := make([]string, 0, len(extra)/2+len(cadvisorLabels))
		for i := 1; i < len(extra); i += 2 {
			vals = append(vals, extra[i])
		}
		vals = append(vals, e.container, e.id, e.image, e.name, e.namespace, e.pod)
		m, err := prometheus.NewConstMetric(d, t, v, vals...)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(d, err)
			return
		}
		ch <- prometheus.NewMetricWithTimestamp(e.st.Time, m)
	}
	if mi, err := cgroups.MachineCapacity(""); err == nil {
		cores := mi.Cpu().Value()
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("machine_cpu_cores", "Number of logical CPU cores.", []string{"boot_id", "machine_id", "system_uuid"}, nil),
			gauge, float64(cores), machineIDs()...)
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("machine_memory_bytes", "Amount of memory installed on the machine.", []string{"boot_id", "machine_id", "system_uuid"}, nil),
			gauge, float64(mi.Memory().Value()), machineIDs()...)
	}
	es, err := c.es, c.err
	if err != nil {
		a.c.Log.Warn("kubelet API: /metrics/cadvisor", "err", err)
		return
	}
	s := func(ns uint64) float64 { return float64(ns) / 1e9 }
	for i := range es {
		e := &es[i]
		st := &e.st
		emit(e, "container_last_seen", "Last time a container was seen by the exporter", gauge, float64(st.Time.Unix()))
		if !e.start.IsZero() {
			emit(e, "container_start_time_seconds", "Start time of the container since unix epoch in seconds.", gauge, float64(e.start.Unix()))
		}
		if st.HaveCPU {
			emit(e, "container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", counter, s(st.CPUUsageNs), "cpu", "total")
			emit(e, "container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", counter, s(st.CPUUserNs))
			emit(e, "container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", counter, s(st.CPUSystemNs))
			emit(e, "container_cpu_load_average_10s", "Value of container cpu load average over the last 10 seconds.", gauge, 0)
			for _, state := range []string{"iowaiting", "running", "sleeping", "stopped", "uninterruptible"} {
				emit(e, "container_tasks_state", "Number of tasks in given state", gauge, 0, "state", state)
			}
		}
		if st.HaveThrottling && st.CPUQuota > 0 {
			emit(e, "container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", counter, float64(st.Periods))
			emit(e, "container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", counter, float64(st.ThrottledPeriods))
			emit(e, "container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", counter, s(st.ThrottledNs))
		}
		if st.HaveMemory {
			emit(e, "container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", gauge, float64(st.MemUsage))
			emit(e, "container_memory_working_set_bytes", "Current working set in bytes.", gauge, float64(st.MemWorkingSet))
			emit(e, "container_memory_rss", "Size of RSS in bytes.", gauge, float64(st.MemRSS))
			emit(e, "container_memory_cache", "Number of bytes of page cache memory.", gauge, float64(st.MemCache))
			emit(e, "container_memory_mapped_file", "Size of memory mapped files in bytes.", gauge, float64(st.MemMappedFile))
			emit(e, "container_memory_swap", "Container swap usage in bytes.", gauge, float64(st.MemSwap))
			emit(e, "container_memory_max_usage_bytes", "Maximum memory usage recorded in bytes", gauge, float64(st.MemMaxUsage))
			emit(e, "container_memory_failcnt", "Number of memory usage hits limits", counter, float64(st.MemFailcnt))
			for _, f := range []struct {
				typ, scope string
				v          uint64
			}{{"pgfault", "container", st.PgFault}, {"pgfault", "hierarchy", st.HierPgFault},
				{"pgmajfault", "container", st.PgMajFault}, {"pgmajfault", "hierarchy", st.HierPgMajFault}} {
				emit(e, "container_memory_failures_total", "Cumulative count of memory allocation failures.", counter, float64(f.v), "failure_type", f.typ, "scope", f.scope)
			}
			emit(e, "container_oom_events_total", "Count of out of memory events observed for the container", counter, float64(st.OOMKills))
		}
		if st.HaveSpec && e.id != "/" {
			emit(e, "container_spec_cpu_shares", "CPU share of the container.", gauge, float64(st.CPUShares))
			emit(e, "container_spec_cpu_period", "CPU period of the container.", gauge, float64(st.CPUPeriod))
			if st.CPUQuota > 0 {
				emit(e, "container_spec_cpu_quota", "CPU quota of the container.", gauge, float64(st.CPUQuota))
			}
			emit(e, "container_spec_memory_limit_bytes", "Memory limit for the container.", gauge, float64(st.MemLimit))
			emit(e, "container_spec_memory_reservation_limit_bytes", "Memory reservation limit for the container.", gauge, float64(st.MemReservation))
			emit(e, "container_spec_memory_swap_limit_bytes", "Memory swap limit for the container.", gauge, float64(st.SwapLimit))
		}
		// PSI, as kubelet's cAdvisor exports it (KubeletPSI): "waiting"
		// is some task stalled, "stalled" all of them
		for _, p := range []struct {
			res, what string
			psi       *cgroupstats.Pressure
		}{{"cpu", "CPU", st.CPUPressure}, {"memory", "memory", st.MemPressure}, {"io", "IO", st.IOPressure}} {
			if p.psi == nil {
				continue
			}
			emit(e, "container_pressure_"+p.res+"_stalled_seconds_total", "Total time duration no tasks in the container could make progress due to "+p.what+" congestion.", counter, float64(p.psi.Full.Total)/1e6)
			emit(e, "container_pressure_"+p.res+"_waiting_seconds_total", "Total time duration tasks in the container have waited due to "+p.what+" congestion.", counter, float64(p.psi.Some.Total)/1e6)
		}
		for _, dv := range st.Blkio {
			dev := dv.Name
			maj, min := strconv.FormatUint(dv.Major, 10), strconv.FormatUint(dv.Minor, 10)
			emit(e, "container_fs_reads_bytes_total", "Cumulative count of bytes read", counter, float64(dv.ReadBytes), "device", dev)
			emit(e, "container_fs_writes_bytes_total", "Cumulative count of bytes written", counter, float64(dv.WriteBytes), "device", dev)
			emit(e, "container_fs_reads_total", "Cumulative count of reads completed", counter, float64(dv.Reads), "device", dev)
			emit(e, "container_fs_writes_total", "Cumulative count of writes completed", counter, float64(dv.Writes), "device", dev)
			for _, op := range []struct {
				name string
				v    uint64
			}{{"Read", dv.ReadBytes}, {"Write", dv.WriteBytes}} {
				emit(e, "container_blkio_device_usage_total", "Blkio Device bytes usage", counter, float64(op.v),
					"device", dev, "major", maj, "minor", min, "operation", op.name)
			}
		}
		if e.fs != nil && e.fs.UsedBytes != nil {
			dev := ""
			if e.fs.FsId != nil {
				dev = e.fs.FsId.Mountpoint
			}
			emit(e, "container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", gauge, float64(e.fs.UsedBytes.Value), "device", dev)
		}
		if st.HaveProcesses {
			emit(e, "container_processes", "Number of processes running inside the container.", gauge, float64(st.Processes))
			emit(e, "container_threads", "Number of threads running inside the container", gauge, float64(st.Threads))
			emit(e, "container_threads_max", "Maximum number of threads allowed inside the container, infinity if value is zero", gauge, float64(st.ThreadsMax))
			emit(e, "container_file_descriptors", "Number of open file descriptors for the container.", gauge, float64(st.FDs))
			emit(e, "container_sockets", "Number of open sockets for the container.", gauge, float64(st.Sockets))
			if st.Pid != 0 {
				emit(e, "container_ulimits_soft", "Soft ulimit values for the container root process. Unlimited if -1, except priority and nice", gauge, float64(st.OpenFilesSoft), "ulimit", "max_open_files")
			}
		}
		for _, n := range e.net {
			emit(e, "container_network_receive_bytes_total", "Cumulative count of bytes received", counter, float64(n.RxBytes), "interface", n.Name)
			emit(e, "container_network_receive_packets_total", "Cumulative count of packets received", counter, float64(n.RxPackets), "interface", n.Name)
			emit(e, "container_network_receive_packets_dropped_total", "Cumulative count of packets dropped while receiving", counter, float64(n.RxDropped), "interface", n.Name)
			emit(e, "container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", counter, float64(n.RxErrors), "interface", n.Name)
			emit(e, "container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", counter, float64(n.TxBytes), "interface", n.Name)
			emit(e, "container_network_transmit_packets_total", "Cumulative count of packets transmitted", counter, float64(n.TxPackets), "interface", n.Name)
			emit(e, "container_network_transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting", counter, float64(n.TxDropped), "interface", n.Name)
			emit(e, "container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", counter, float64(n.TxErrors), "interface", n.Name)
		}
	}
}

// machineIDs are machine_*'s labels: boot_id, machine_id, system_uuid
// ("" where the file cannot be read, as cAdvisor leaves them).
func machineIDs() []string {
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	return []string{read("/proc/sys/kernel/random/boot_id"), read("/etc/machine-id"), read("/sys/class/dmi/id/product_uuid")}
}

// metricsCadvisor serves /metrics/cadvisor from the current housekeeping
// pass (StatsCache): its series are gathered once per pass, and a request
// only encodes them.
func (a *API) metricsCadvisor(w http.ResponseWriter, r *http.Request) {
	gather := func(es []cgroupEntry, err error) ([]*dto.MetricFamily, error) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(cadvisorCollector{a: a, es: es, err: err})
		return reg.Gather()
	}
	var fams []*dto.MetricFamily
	var gerr error
	if a.dirs == nil {
		fams, gerr = gather(nil, errors.New("no cgroup filesystem"))
	} else if err := a.withPass(r.Context(), func(p *pass) {
		if !p.gathered {
			p.families, p.gatherErr = gather(a.buildEntries(p), nil)
			p.gathered = true
		}
		fams, gerr = p.families, p.gatherErr
	}); err != nil {
		fams, gerr = gather(nil, err)
	}
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return fams, gerr })
	promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}
