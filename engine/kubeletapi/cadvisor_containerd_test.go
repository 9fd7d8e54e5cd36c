package kubeletapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/speclet/speclet/engine/config"
)

// scrape parses a Prometheus text page.
func scrape(t *testing.T, c *http.Client, u string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, c, u)
	if code != 200 {
		t.Fatalf("GET %s: %d %s", u, code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("GET %s: not the Prometheus text format: %v", u, err)
	}
	return fams
}

// series returns the samples of name whose labels include want.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return -1
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestContainerdCadvisor runs a pod with a busy container limited to 64 MiB
// on a real containerd and reads it back as a user of cAdvisor's series
// and the summary would: its container_cpu_usage_seconds_total grows, its
// working set is above 0 and under the limit, container_spec_memory_limit_bytes
// is the limit, the labels name the pod, the container and its image, the
// pod's own cgroup and the node's root are there; the read-only handler
// serves the same without credentials; a readiness probe's results are
// counted in /metrics/probes with kubelet's labels.
func TestContainerdCadvisor(t *testing.T) {
	n := startNode(t, onlyUser("admin"), nil)
	const limit = 64 << 20
	busy := n.pod("busy", v1.Container{Name: "main", Command: []string{"sh", "-c", `while true; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.05; done`},
		Resources:      v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: *resource.NewQuantity(limit, resource.BinarySI)}},
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 1}})
	n.updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{busy}, Source: config.SourceFile}
	n.waitFor(t, "busy Running", func() bool { return n.allRunning("busy") })
	admin := n.httpClient(t, "admin")
	ctr := map[string]string{"namespace": "default", "pod": "busy", "container": "main"}

	cpu := func(fams map[string]*dto.MetricFamily) float64 {
		s := series(fams, "container_cpu_usage_seconds_total", ctr)
		if len(s) != 1 {
			t.Fatalf("container_cpu_usage_seconds_total of busy/main: %d series, want 1", len(s))
		}
		if label(s[0], "cpu") != "total" {
			t.Errorf("cpu label %q, want total", label(s[0], "cpu"))
		}
		return value(s[0])
	}
	fams := scrape(t, admin, n.base+"/metrics/cadvisor")
	first := cpu(fams)
	n.waitFor(t, "busy's CPU time to grow", func() bool { return cpu(scrape(t, admin, n.base+"/metrics/cadvisor")) > first })

	ws := series(fams, "container_memory_working_set_bytes", ctr)
	if len(ws) != 1 || value(ws[0]) <= 0 || value(ws[0]) >= limit {
		t.Errorf("working set of busy/main: %v, want one in (0, %d)", ws, limit)
	} else {
		m := ws[0]
		if id, name := label(m, "id"), label(m, "name"); name == "" || !strings.HasSuffix(id, "/"+name) {
			t.Errorf("id %q, name %q: want the container's cgroup and its ID", id, name)
		}
		if !strings.Contains(label(m, "image"), "busybox") {
			t.Errorf("image %q, want busybox's", label(m, "image"))
		}
		if m.TimestampMs == nil {
			t.Error("no sample timestamp (cAdvisor stamps each sample)")
		}
	}
	if l := series(fams, "container_spec_memory_limit_bytes", ctr); len(l) != 1 || value(l[0]) != limit {
		t.Errorf("container_spec_memory_limit_bytes of busy/main: %v, want %d", l, limit)
	}
	for _, name := range []string{"container_memory_usage_bytes", "container_memory_rss", "container_processes", "container_threads", "container_start_time_seconds", "container_last_seen"} {
		if s := series(fams, name, ctr); len(s) != 1 || value(s[0]) <= 0 {
			t.Errorf("%s of busy/main: %v, want one above 0", name, s)
		}
	}
	if s := series(fams, "container_memory_cache", ctr); len(s) != 1 {
		t.Errorf("container_memory_cache of busy/main: %v", s)
	}
	if s := series(fams, "container_cpu_usage_seconds_total", map[string]string{"id": "/", "container": "", "pod": ""}); len(s) != 1 || value(s[0]) <= first {
		t.Errorf("the node's root cgroup: %v, want its CPU above the container's", s)
	}
	if s := series(fams, "machine_cpu_cores", nil); len(s) != 1 || value(s[0]) != float64(runtime.NumCPU()) {
		t.Errorf("machine_cpu_cores %v, want %d", s, runtime.NumCPU())
	}
	if s := series(fams, "container_network_receive_bytes_total", map[string]string{"id": "/"}); len(s) == 0 {
		t.Error("no network series of the node's root")
	}
	sb := series(fams, "container_memory_working_set_bytes", map[string]string{"namespace": "default", "pod": "busy", "container": "POD"})
	if len(sb) != 1 {
		t.Errorf("the sandbox's series: %v, want one as container POD", sb)
	}

	// The read-only port's handler: the same routes without credentials.
	ro := httptest.NewServer(n.api.ReadOnlyHandler())
	defer ro.Close()
	roFams := scrape(t, ro.Client(), ro.URL+"/metrics/cadvisor")
	if len(series(roFams, "container_cpu_usage_seconds_total", ctr)) != 1 {
		t.Error("read-only /metrics/cadvisor lacks busy/main")
	}
	code, body := get(t, ro.Client(), ro.URL+"/stats/summary")
	var s statsapi.Summary
	if code != 200 || json.Unmarshal([]byte(body), &s) != nil {
		t.Fatalf("read-only /stats/summary: %d %.300s", code, body)
	}
	checkSummary(t, &s, limit)
	if code, _ := get(t, ro.Client(), ro.URL+"/metrics/resource"); code != 200 {
		t.Errorf("read-only /metrics/resource: %d", code)
	}
	if code, _ := get(t, ro.Client(), ro.URL+"/pods"); code != 404 {
		t.Errorf("read-only stats handler serves /pods: %d, want 404 (engine/server's)", code)
	}

	// /metrics/probes: the readiness probe runs every second.
	probe := map[string]string{"probe_type": "Readiness", "result": "successful", "container": "main", "pod": "busy", "namespace": "default", "pod_uid": "busy-uid"}
	n.waitFor(t, "two successful readiness probes counted", func() bool {
		s := series(scrape(t, admin, n.base+"/metrics/probes"), "prober_probe_total", probe)
		return len(s) == 1 && value(s[0]) >= 2
	})
	pf := scrape(t, ro.Client(), ro.URL+"/metrics/probes")
	if h := pf["prober_probe_duration_seconds"]; h == nil || len(h.Metric) != 1 || h.Metric[0].Histogram.GetSampleCount() < 2 {
		t.Errorf("prober_probe_duration_seconds: %v", h)
	}
	if pf["process_start_time_seconds"] == nil {
		t.Error("/metrics/probes lacks process_start_time_seconds")
	}
}

// checkSummary checks the summary's node and the busy pod as the node e2e
// Summary API spec bounds them, for the fields speclet measures.
func checkSummary(t *testing.T, s *statsapi.Summary, limit uint64) {
	t.Helper()
	nd := s.Node
	in := func(what string, v *uint64, lo, hi uint64) {
		t.Helper()
		if v == nil || *v < lo || *v > hi {
			got := "nil"
			if v != nil {
				got = fmt.Sprint(*v)
			}
			t.Errorf("%s = %s, want in [%d, %d]", what, got, lo, hi)
		}
	}
	if nd.Memory == nil || nd.CPU == nil || nd.Fs == nil || nd.Runtime == nil || nd.Runtime.ImageFs == nil || nd.Rlimit == nil || nd.Network == nil {
		t.Fatalf("node stats incomplete: %+v", nd)
	}
	in("node memory rss", nd.Memory.RSSBytes, 1, 1<<50)
	in("node memory page faults", nd.Memory.PageFaults, 1000, 1e15)
	in("node imagefs capacity", nd.Runtime.ImageFs.CapacityBytes, 100<<20, 10<<40)
	if nd.Runtime.ImageFs.UsedBytes == nil || nd.Runtime.ContainerFs == nil { // containerd counts the usage on its own period: 0 at first
		t.Errorf("node imagefs: %+v, container fs %+v", nd.Runtime.ImageFs, nd.Runtime.ContainerFs)
	}
	if nd.Rlimit.MaxPID == nil || *nd.Rlimit.MaxPID < 1 || nd.Rlimit.NumOfRunningProcesses == nil || *nd.Rlimit.NumOfRunningProcesses < 1 {
		t.Errorf("node rlimit: %+v", nd.Rlimit)
	}
	if len(nd.Network.Interfaces) == 0 {
		t.Error("node network: no interfaces")
	}
	var pod *statsapi.PodStats
	for i := range s.Pods {
		if s.Pods[i].PodRef.Name == "busy" {
			pod = &s.Pods[i]
		}
	}
	if pod == nil || len(pod.Containers) != 1 {
		t.Fatalf("no busy pod with one container in the summary")
	}
	c := pod.Containers[0]
	if c.Memory == nil || c.CPU == nil || c.Rootfs == nil {
		t.Fatalf("busy/main incomplete: %+v", c)
	}
	in("busy/main working set", c.Memory.WorkingSetBytes, 10<<10, limit)
	in("busy/main available", c.Memory.AvailableBytes, 1<<10, limit)
	in("busy/main rss", c.Memory.RSSBytes, 1<<10, limit)
	in("busy/main page faults", c.Memory.PageFaults, 100, 1e9)
	in("busy/main rootfs capacity", c.Rootfs.CapacityBytes, 100<<20, 10<<40)
	if pod.ProcessStats == nil {
		t.Error("busy: no process stats")
	} else {
		in("busy process count", pod.ProcessStats.ProcessCount, 1, 1e8)
	}
	if pod.EphemeralStorage == nil {
		t.Error("busy: no ephemeral storage")
	}
}
