package kubeletapi_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/speclet/speclet/engine/cgroupstats"
	"github.com/speclet/speclet/engine/kubeletapi"
)

// passRuntime is fakeStatsRuntime whose pod can be removed, counting the
// ListContainerStats calls (one per housekeeping pass).
type passRuntime struct {
	fakeStatsRuntime
	mu      sync.Mutex
	removed bool
	stats   int
}

func (f *passRuntime) gone() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.removed
}

func (f *passRuntime) ListPodSandbox(ctx context.Context, fl *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if f.gone() {
		return nil, nil
	}
	return f.fakeStatsRuntime.ListPodSandbox(ctx, fl)
}

func (f *passRuntime) ListContainers(ctx context.Context, fl *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if f.gone() {
		return nil, nil
	}
	return f.fakeStatsRuntime.ListContainers(ctx, fl)
}

func (f *passRuntime) ListContainerStats(ctx context.Context, fl *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	f.mu.Lock()
	f.stats++
	f.mu.Unlock()
	if f.gone() {
		return nil, nil
	}
	return f.fakeStatsRuntime.ListContainerStats(ctx, fl)
}

func (f *passRuntime) statsCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// TestStatsCache serves /stats/summary and /metrics/cadvisor of one pod
// (a cgroup v1 tree in a directory) from two APIs sharing one StatsCache,
// on an injected clock: within DefaultStatsMaxAge both pages and both APIs
// reuse one pass (the cgroup files changed, the values did not, the
// runtime was asked for container stats once); at the max age the pass is
// read anew (the new values, and the CPU rate between the two passes); a
// pod the runtime no longer lists is gone from both pages at the next
// request, and one it lists again is back, within the age.
func TestStatsCache(t *testing.T) {
	root := t.TempDir()
	dir := func(ctrl, rel string) string { return filepath.Join(root, ctrl, rel) }
	setCgroup := func(rel, memUsage, cpuNs string) {
		writeFiles(t, dir("memory", rel), map[string]string{"memory.usage_in_bytes": memUsage, "memory.limit_in_bytes": "83886080",
			"memory.stat": "total_rss 8192\ntotal_cache 4096\ntotal_inactive_file 1000\ntotal_pgfault 300\n"})
		writeFiles(t, dir("cpuacct", rel), map[string]string{"cpuacct.usage": cpuNs, "cpuacct.stat": "user 100\nsystem 50\n"})
		writeFiles(t, dir("cpu", rel), map[string]string{"cpu.shares": "2", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1", "cgroup.procs": ""})
	}
	for _, rel := range []string{"/", "/kubepods/besteffort/podu1", "/kubepods/besteffort/podu1/sb1"} {
		setCgroup(rel, "3000000", "1000000000")
	}
	const ctr = "/kubepods/besteffort/podu1/c1"
	setCgroup(ctr, "2000000", "1000000000")

	var mu sync.Mutex
	clock := time.Unix(1_700_000_000, 0)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	rt := &passRuntime{fakeStatsRuntime: fakeStatsRuntime{fsDir: root}}
	cache := kubeletapi.NewStatsCache(0)
	serve := func() *httptest.Server {
		api, err := kubeletapi.New(kubeletapi.Config{Host: noPods{}, Runtime: rt, Labels: statsLabels, NodeName: "n",
			Authorizer: kubeletapi.AlwaysAllow{}, Now: now, Stats: cache,
			Cgroups: &cgroupstats.Dirs{Dir: dir, Proc: filepath.Join(root, "proc")}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(api.ReadOnlyHandler())
		t.Cleanup(srv.Close)
		return srv
	}
	a, b := serve(), serve() // the two ports of one node
	summary := func(srv *httptest.Server) statsapi.Summary {
		t.Helper()
		code, body := get(t, srv.Client(), srv.URL+"/stats/summary")
		var s statsapi.Summary
		if code != 200 || json.Unmarshal([]byte(body), &s) != nil {
			t.Fatalf("/stats/summary: %d %s", code, body)
		}
		return s
	}
	container := func(s statsapi.Summary) *statsapi.ContainerStats {
		t.Helper()
		if len(s.Pods) != 1 || len(s.Pods[0].Containers) != 1 {
			t.Fatalf("summary pods %+v, want web with main", s.Pods)
		}
		return &s.Pods[0].Containers[0]
	}
	cadvisor := func(srv *httptest.Server) string {
		t.Helper()
		_, body := get(t, srv.Client(), srv.URL+"/metrics/cadvisor")
		return body
	}
	wsSeries := func(v string, at time.Time) string {
		return `container_memory_working_set_bytes{container="main",id="` + ctr + `",image="registry.test/busybox:1",name="c1",namespace="shop",pod="web"} ` +
			v + " " + jsonInt(at.UnixMilli()) + "\n"
	}

	t0 := now()
	c := container(summary(a))
	if *c.Memory.WorkingSetBytes != 1999000 || c.CPU.UsageNanoCores != nil {
		t.Errorf("first pass: working set %d, nano cores %v; want 1999000 and none (no earlier reading)", *c.Memory.WorkingSetBytes, c.CPU.UsageNanoCores)
	}
	if n := rt.statsCalls(); n != 1 {
		t.Fatalf("ListContainerStats calls after one summary: %d, want 1", n)
	}

	// within the max age: the same pass, whatever the files say now
	setCgroup(ctr, "5000000", "2000000000")
	advance(kubeletapi.DefaultStatsMaxAge - time.Millisecond)
	if c := container(summary(b)); *c.Memory.WorkingSetBytes != 1999000 || c.Memory.Time.Time.UnixMilli() != t0.UnixMilli() {
		t.Errorf("within the max age, the other API: working set %d at %v; want the first pass's 1999000 at %v", *c.Memory.WorkingSetBytes, c.Memory.Time, t0)
	}
	if body := cadvisor(a); !strings.Contains(body, wsSeries("1.999e+06", t0)) {
		t.Errorf("within the max age /metrics/cadvisor lacks the first pass's\n%s\nin\n%s", wsSeries("1.999e+06", t0), body)
	}
	if n := rt.statsCalls(); n != 1 {
		t.Errorf("ListContainerStats calls within the max age: %d, want still 1", n)
	}

	// at the max age: a new pass
	advance(time.Millisecond)
	t1 := now()
	c = container(summary(b))
	if *c.Memory.WorkingSetBytes != 4999000 {
		t.Errorf("at the max age: working set %d, want the new 4999000", *c.Memory.WorkingSetBytes)
	}
	// 1 s of CPU over the 10 s between the passes
	if c.CPU.UsageNanoCores == nil || *c.CPU.UsageNanoCores != 1e8 {
		t.Errorf("nano cores between the passes: %v, want 1e8", c.CPU.UsageNanoCores)
	}
	if body := cadvisor(a); !strings.Contains(body, wsSeries("4.999e+06", t1)) {
		t.Errorf("at the max age /metrics/cadvisor lacks the new\n%s", wsSeries("4.999e+06", t1))
	}
	if n := rt.statsCalls(); n != 2 {
		t.Errorf("ListContainerStats calls after two passes: %d, want 2", n)
	}

	// a removed pod is gone at the next request, well within the age
	rt.mu.Lock()
	rt.removed = true
	rt.mu.Unlock()
	advance(time.Second)
	if s := summary(a); len(s.Pods) != 0 {
		t.Errorf("summary after the pod's removal: %+v, want no pod", s.Pods)
	}
	if body := cadvisor(b); strings.Contains(body, `pod="web"`) {
		t.Errorf("/metrics/cadvisor after the pod's removal still has pod web:\n%s", body)
	}
	// and one listed again is back
	rt.mu.Lock()
	rt.removed = false
	rt.mu.Unlock()
	advance(time.Second)
	if c := container(summary(b)); *c.Memory.WorkingSetBytes != 4999000 {
		t.Errorf("the pod listed again: working set %d, want 4999000", *c.Memory.WorkingSetBytes)
	}
	if n := rt.statsCalls(); n != 4 {
		t.Errorf("ListContainerStats calls after the removal and the return: %d, want 4 (a pass for each)", n)
	}
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
