package kubeletapi_test

import (
	"context"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/config"
)

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStatsSummary100 serves /stats/summary of 100 running pods on a
// real containerd, over HTTPS with a client certificate; it reports the
// latency per request and the CPU this process (server and client) spent
// per request. containerd's own work for the CRI stats calls is not in it.
func BenchmarkStatsSummary100(b *testing.B) {
	n := startNode(b, onlyUser("admin"), nil)
	var pods []*v1.Pod
	for i := 0; i < 100; i++ {
		pods = append(pods, n.pod(fmt.Sprintf("p%03d", i), v1.Container{Name: "main", Command: []string{"sleep", "3600"}}))
	}
	n.updates <- config.PodUpdate{Op: config.OpAdd, Pods: pods, Source: config.SourceFile}
	n.waitFor(b, "100 pods Running", func() bool {
		ps := n.eng.Pods()
		if len(ps) != 100 {
			return false
		}
		for _, p := range ps {
			if p.Status.Phase != v1.PodRunning {
				return false
			}
		}
		return true
	})
	c := n.httpClient(b, "admin")
	fetch := func() int {
		resp, err := c.Get(n.base + "/stats/summary")
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("/stats/summary: %d %s", resp.StatusCode, body)
		}
		return len(body)
	}
	size := fetch()
	cpu0, start := cpuTime(), time.Now()
	for b.Loop() {
		fetch()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	// the runtime's share: the two CRI stats calls alone, as a floor
	ctx := context.Background()
	t0 := time.Now()
	if _, err := n.rt.ListContainerStats(ctx, nil); err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	if _, err := n.rt.ListPodSandboxStats(ctx, nil); err != nil {
		b.Logf("ListPodSandboxStats: %v", err)
	}
	t2 := time.Now()
	b.ReportMetric(float64(t1.Sub(t0).Microseconds())/1000, "ms/ListContainerStats")
	b.ReportMetric(float64(t2.Sub(t1).Microseconds())/1000, "ms/ListPodSandboxStats")
	b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(b.N), "ms/summary")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/summary")
	b.ReportMetric(float64(size), "bytes/summary")
}

// BenchmarkLogStream reads a 48 MiB container log (CRI format, written by a
// busybox container on containerd) through /containerLogs over HTTPS and
// reports the throughput of the log content.
func BenchmarkLogStream(b *testing.B) {
	n := startNode(b, onlyUser("admin"), nil)
	// 524288 lines of 95 characters and a newline: 48 MiB of content
	p := n.pod("writer", v1.Container{Name: "main", Command: []string{"sh", "-c",
		`yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -n 524288; echo done; sleep 3600`}})
	n.updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{p}, Source: config.SourceFile}
	c := n.httpClient(b, "admin")
	u := n.base + "/containerLogs/default/writer/main"
	n.waitFor(b, "the log complete", func() bool {
		resp, err := c.Get(u + "?tailLines=1")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(body) == "done\n"
	})
	var total int64
	start := time.Now()
	for b.Loop() {
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		k, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if k != 48<<20+int64(len("done\n")) {
			b.Fatalf("read %d bytes, want 48 MiB and done", k)
		}
		total += k
	}
	b.ReportMetric(float64(total)/(1<<20)/time.Since(start).Seconds(), "MiB/s")
}
