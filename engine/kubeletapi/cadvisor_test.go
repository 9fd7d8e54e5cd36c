package kubeletapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/speclet/speclet/engine/cgroupstats"
	"github.com/speclet/speclet/engine/kubeletapi"
)

// fakeStatsRuntime lists one ready sandbox and its running container.
type fakeStatsRuntime struct {
	kubeletapi.Runtime
	fsDir string
}

var statsLabels = kubeletapi.Labels{PodUID: "uid", PodName: "pod", PodNamespace: "ns", ContainerName: "ctr"}

func (f fakeStatsRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	return []*runtimeapi.PodSandbox{{Id: "sb1", CreatedAt: 1e18, Labels: map[string]string{"uid": "u1", "pod": "web", "ns": "shop"}}}, nil
}

func (f fakeStatsRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return []*runtimeapi.Container{{Id: "c1", PodSandboxId: "sb1", CreatedAt: 1.5e18, Image: &runtimeapi.ImageSpec{Image: "registry.test/busybox:1"},
		Labels: map[string]string{"uid": "u1", "pod": "web", "ns": "shop", "ctr": "main"}}}, nil
}

func (f fakeStatsRuntime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return []*runtimeapi.ContainerStats{{Attributes: &runtimeapi.ContainerAttributes{Id: "c1"},
		WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: 1, FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: f.fsDir}, UsedBytes: &runtimeapi.UInt64Value{Value: 4096}}}}, nil
}

func (f fakeStatsRuntime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return nil, nil
}

func (f fakeStatsRuntime) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: f.fsDir},
		UsedBytes: &runtimeapi.UInt64Value{Value: 1 << 20}}}}, nil
}

type noPods struct{}

func (noPods) Pods() []*v1.Pod { return nil }
func (noPods) Healthz() error  { return nil }

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCadvisorFormat serves /metrics/cadvisor and /stats/summary of a
// cgroup v1 tree laid out in a directory: the series have cAdvisor's
// names, label sets (container, id, image, name, namespace, pod and the
// series' own), values in cAdvisor's units, and a timestamp; the pod's
// cgroup is container "" and the sandbox's "POD".
func TestCadvisorFormat(t *testing.T) {
	root := t.TempDir()
	// ctrl "" is the hybrid host's cgroup2 mount, where the kernel keeps
	// each cgroup's pressure (PSI) files.
	dir := func(ctrl, rel string) string {
		if ctrl == "" {
			return filepath.Join(root, "unified", rel)
		}
		return filepath.Join(root, ctrl, rel)
	}
	// v1's memory.stat: a leaf's own page faults are its hierarchy's, a
	// parent without processes (the pod's cgroup) has none of its own.
	mem := func(usage, inactive string, leaf bool) map[string]string {
		own := "0"
		if leaf {
			own = "300"
		}
		return map[string]string{"memory.usage_in_bytes": usage, "memory.limit_in_bytes": "83886080", "memory.stat": "pgfault " + own + "\ntotal_rss 8192\ntotal_cache 4096\ntotal_inactive_file " + inactive + "\ntotal_pgfault 300\n"}
	}
	for rel, usage := range map[string]string{"/": "900000000", "/kubepods/besteffort/podu1": "3000000", "/kubepods/besteffort/podu1/sb1": "1000000", "/kubepods/besteffort/podu1/c1": "2000000", "/runtime": "5000000"} {
		writeFiles(t, dir("memory", rel), mem(usage, "1000", rel != "/kubepods/besteffort/podu1"))
		writeFiles(t, dir("cpuacct", rel), map[string]string{"cpuacct.usage": "1500000000", "cpuacct.stat": "user 100\nsystem 50\n"})
		writeFiles(t, dir("cpu", rel), map[string]string{"cpu.shares": "2", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1", "cgroup.procs": ""})
		psi := "some avg10=2.50 avg60=1.00 avg300=0.50 total=4000\nfull avg10=1.25 avg60=0.50 avg300=0.25 total=2000\n"
		writeFiles(t, dir("", rel), map[string]string{"cpu.pressure": psi, "memory.pressure": psi, "io.pressure": psi})
	}
	now := time.Unix(1_700_000_000, 0)
	api, err := kubeletapi.New(kubeletapi.Config{Host: noPods{}, Runtime: fakeStatsRuntime{fsDir: root}, Labels: statsLabels, NodeName: "n",
		Authorizer: kubeletapi.AlwaysAllow{}, Now: func() time.Time { return now },
		Cgroups: &cgroupstats.Dirs{Dir: dir, Proc: filepath.Join(root, "proc")},
		// the runtime's cgroup is there, the system cgroup is not
		SystemCgroups: map[string]string{statsapi.SystemContainerRuntime: "/runtime", statsapi.SystemContainerMisc: "/system"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.ReadOnlyHandler())
	defer srv.Close()
	_, body := get(t, srv.Client(), srv.URL+"/metrics/cadvisor")
	for _, want := range []string{
		"# TYPE container_cpu_usage_seconds_total counter\n",
		`container_cpu_usage_seconds_total{container="main",cpu="total",id="/kubepods/besteffort/podu1/c1",image="registry.test/busybox:1",name="c1",namespace="shop",pod="web"} 1.5 1700000000000` + "\n",
		`container_cpu_user_seconds_total{container="main",id="/kubepods/besteffort/podu1/c1",image="registry.test/busybox:1",name="c1",namespace="shop",pod="web"} 1 1700000000000` + "\n",
		`container_memory_working_set_bytes{container="main",id="/kubepods/besteffort/podu1/c1",image="registry.test/busybox:1",name="c1",namespace="shop",pod="web"} 1.999e+06 1700000000000` + "\n",
		`container_memory_working_set_bytes{container="",id="/kubepods/besteffort/podu1",image="",name="",namespace="shop",pod="web"} 2.999e+06 1700000000000` + "\n",
		`container_memory_working_set_bytes{container="POD",id="/kubepods/besteffort/podu1/sb1",image="",name="sb1",namespace="shop",pod="web"} 999000 1700000000000` + "\n",
		`container_memory_working_set_bytes{container="",id="/",image="",name="",namespace="",pod=""} 8.99999e+08 1700000000000` + "\n",
		`container_spec_memory_limit_bytes{container="main",id="/kubepods/besteffort/podu1/c1",image="registry.test/busybox:1",name="c1",namespace="shop",pod="web"} 8.388608e+07 1700000000000` + "\n",
		`container_memory_failures_total{container="main",failure_type="pgfault",id="/kubepods/besteffort/podu1/c1",image="registry.test/busybox:1",name="c1",namespace="shop",pod="web",scope="hierarchy"} 300 1700000000000` + "\n",
		`container_fs_usage_bytes{container="main",device="` + root + `",id="/kubepods/besteffort/podu1/c1",image="registry.test/busybox:1",name="c1",namespace="shop",pod="web"} 4096 1700000000000` + "\n",
		`container_start_time_seconds{container="main",id="/kubepods/besteffort/podu1/c1",image="registry.test/busybox:1",name="c1",namespace="shop",pod="web"} 1.5e+09 1700000000000` + "\n",
		`container_pressure_io_stalled_seconds_total{container="main",id="/kubepods/besteffort/podu1/c1",image="registry.test/busybox:1",name="c1",namespace="shop",pod="web"} 0.002 1700000000000` + "\n",
		`container_pressure_cpu_waiting_seconds_total{container="",id="/",image="",name="",namespace="",pod=""} 0.004 1700000000000` + "\n",
		"# TYPE machine_cpu_cores gauge\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics/cadvisor lacks\n%s", want)
		}
	}
	if strings.Contains(body, `container_spec_cpu_shares{container="",id="/"`) {
		t.Error("the root cgroup has spec series (cAdvisor has none for it)")
	}
	if t.Failed() {
		t.Logf("body:\n%s", body)
	}

	_, body = get(t, srv.Client(), srv.URL+"/stats/summary")
	var s statsapi.Summary
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 1 || len(s.Pods[0].Containers) != 1 {
		t.Fatalf("summary pods: %s", body)
	}
	p, c := s.Pods[0], s.Pods[0].Containers[0]
	if p.Memory == nil || *p.Memory.WorkingSetBytes != 2999000 || *p.Memory.AvailableBytes != 83886080-2999000 || *p.Memory.PageFaults != 0 {
		t.Errorf("pod memory from its cgroup: %+v", p.Memory)
	}
	if c.Memory == nil || *c.Memory.WorkingSetBytes != 1999000 || *c.Memory.RSSBytes != 8192 || *c.Memory.PageFaults != 300 {
		t.Errorf("container memory from its cgroup: %+v", c.Memory)
	}
	if c.Rootfs == nil || *c.Rootfs.UsedBytes != 4096 || c.Rootfs.CapacityBytes == nil {
		t.Errorf("rootfs: %+v", c.Rootfs)
	}
	if s.Node.Runtime == nil || s.Node.Runtime.ImageFs == nil || *s.Node.Runtime.ImageFs.UsedBytes != 1<<20 || s.Node.Runtime.ContainerFs == nil {
		t.Errorf("runtime image fs: %+v", s.Node.Runtime)
	}
	if p.EphemeralStorage == nil || *p.EphemeralStorage.UsedBytes != 4096 {
		t.Errorf("ephemeral storage: %+v", p.EphemeralStorage)
	}
	if p.ProcessStats == nil || *p.ProcessStats.ProcessCount != 0 {
		t.Errorf("process stats: %+v", p.ProcessStats)
	}
	var sys []string
	for _, c := range s.Node.SystemContainers {
		sys = append(sys, c.Name)
		if c.Name == statsapi.SystemContainerRuntime && (c.Memory == nil || *c.Memory.WorkingSetBytes != 4999000 || c.IO == nil) {
			t.Errorf("runtime system container: memory %+v, io %+v", c.Memory, c.IO)
		}
	}
	if strings.Join(sys, ",") != "runtime" {
		t.Errorf("system containers %v, want [runtime] (kubepods has no files of its own here, /system is not there, and the test process's own cgroup is not under this tree)", sys)
	}
	// PSI: node, pod and container, CPU, memory and I/O, each from its
	// cgroup's pressure files, totals in the kernel's microseconds.
	want := statsapi.PSIStats{Some: statsapi.PSIData{Total: 4000, Avg10: 2.5, Avg60: 1, Avg300: 0.5},
		Full: statsapi.PSIData{Total: 2000, Avg10: 1.25, Avg60: 0.5, Avg300: 0.25}}
	if s.Node.CPU == nil || s.Node.Memory == nil || s.Node.IO == nil || p.CPU == nil || p.Memory == nil || p.IO == nil || c.CPU == nil || c.Memory == nil || c.IO == nil {
		t.Fatalf("CPU, memory or I/O stats missing: node %+v %+v %+v, pod %+v %+v %+v, container %+v %+v %+v",
			s.Node.CPU, s.Node.Memory, s.Node.IO, p.CPU, p.Memory, p.IO, c.CPU, c.Memory, c.IO)
	}
	for _, c := range []struct {
		name string
		got  *statsapi.PSIStats
	}{
		{"node cpu", s.Node.CPU.PSI}, {"node memory", s.Node.Memory.PSI}, {"node io", s.Node.IO.PSI},
		{"pod cpu", p.CPU.PSI}, {"pod memory", p.Memory.PSI}, {"pod io", p.IO.PSI},
		{"container cpu", c.CPU.PSI}, {"container memory", c.Memory.PSI}, {"container io", c.IO.PSI},
	} {
		if c.got == nil || *c.got != want {
			t.Errorf("%s PSI %+v, want %+v", c.name, c.got, want)
		}
	}
}
