package kubeletapi_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/kubeletapi"
	"github.com/speclet/speclet/test/cluster"
)

// cpuTime is this process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStatsSummary100 serves /stats/summary of 100 running pods on a
// real containerd, over HTTPS; it reports the latency per request and the
// CPU this process (server and client) spent per request. containerd's own
// work for the CRI stats calls is not in it. Two ways:
//
//	pass:   every request makes its own housekeeping pass (a StatsCache
//	        that reuses none): the runtime's stats and every pod's cgroups;
//	cached: the node's default, a pass reused for DefaultStatsMaxAge, as
//	        repeated scrapes within it get it.
func BenchmarkStatsSummary100(b *testing.B) { benchStats(b, "/stats/summary") }

// BenchmarkMetricsCadvisor100 is BenchmarkStatsSummary100 for
// /metrics/cadvisor: the CRI's three lists and the cgroup files of 100
// pods (each pod's, its sandbox's and its container's); it also reports
// the process's peak RSS.
func BenchmarkMetricsCadvisor100(b *testing.B) { benchStats(b, "/metrics/cadvisor") }

func benchStats(b *testing.B, path string) {
	var root string
	n := startNodeServing(b, onlyUser("admin"), nil, func(api *kubeletapi.API, r string) (*tls.Config, []byte) {
		root = r
		cert, certPath, err := kubeletapi.ServingCert("", "", filepath.Join(r, "pki"), "node-a", nil, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		pem, _ := os.ReadFile(certPath)
		return api.TLSConfig(cert), pem
	})
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
	// serve is the node's API with the stats of cache, over HTTPS
	serve := func(b *testing.B, cache *kubeletapi.StatsCache) (*http.Client, string) {
		api, err := kubeletapi.New(kubeletapi.Config{Host: n.eng, Runtime: n.rt, NodeName: "node-a", RootDir: root, PodLogsDir: filepath.Join(root, "logs"),
			Anonymous: true, Authorizer: kubeletapi.AlwaysAllow{}, Stats: cache,
			Labels: kubeletapi.Labels{PodUID: engine.LabelPodUID, PodName: engine.LabelPodName,
				PodNamespace: engine.LabelPodNamespace, ContainerName: engine.LabelContainerName}})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewTLSServer(api)
		b.Cleanup(srv.Close)
		return srv.Client(), srv.URL
	}
	run := func(b *testing.B, cache *kubeletapi.StatsCache) {
		c, base := serve(b, cache)
		fetch := func() int {
			resp, err := c.Get(base + path)
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("%s: %d %s", path, resp.StatusCode, body)
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
		b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(b.N), "ms/request")
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/request")
		b.ReportMetric(float64(size), "bytes/response")
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		b.ReportMetric(float64(ru.Maxrss)/1024, "MB-maxrss")
	}
	b.Run("pass", func(b *testing.B) {
		run(b, kubeletapi.NewStatsCache(-1))
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
	})
	b.Run("cached", func(b *testing.B) { run(b, kubeletapi.NewStatsCache(0)) })
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
	n.logDone(b, c, u)
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

// BenchmarkLogsFollow48MiB follows the 48 MiB log of a running busybox
// container on containerd until its last line ("done"), two ways:
//
//	kubectl:   `kubectl logs -f` through a real kube-apiserver, which
//	           proxies to the node's kubelet API with its client certificate
//	           (the node authorizes it by SubjectAccessReview);
//	client-go: the same request (pods/log?follow=true) from client-go in
//	           this process, without kubectl;
//	direct:    GET /containerLogs?follow=true on the kubelet API.
//
// It reports the throughput of the log content.
func BenchmarkLogsFollow48MiB(b *testing.B) {
	c := cluster.ForTest(b, cluster.Options{})
	ctx := context.Background()
	admin, _, rev, caPEM := nodeA(b, c)
	n := startNode(b, rev, rev, caPEM)
	var kport int32
	fmt.Sscan(n.base[strings.LastIndex(n.base, ":")+1:], &kport)
	registerNode(ctx, b, admin, "node-a", kport, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "127.0.0.1"})
	// 524288 lines of 95 characters and a newline: 48 MiB of content
	p := n.pod("writer", v1.Container{Name: "main", Command: []string{"sh", "-c",
		`yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -n 524288; echo done; sleep 3600`}})
	p.UID, p.Annotations, p.Spec.NodeName = "", nil, "node-a"
	no := false
	p.Spec.AutomountServiceAccountToken = &no
	created, err := admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	fed := created.DeepCopy()
	fed.Annotations = map[string]string{config.AnnotationSource: config.SourceAPI}
	n.updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{fed}, Source: config.SourceAPI}
	// the node authorizes through SubjectAccessReview: system:masters may all
	hc := n.httpClient(b, "admin", "system:masters")
	u := n.base + "/containerLogs/default/writer/main"
	n.logDone(b, hc, u)
	const want = 48<<20 + int64(len("done\n"))
	// follow reads r until the whole log came, then stops the stream
	follow := func(b *testing.B, r io.Reader, stop func()) {
		k, err := io.CopyN(io.Discard, r, want)
		stop()
		if err != nil || k != want {
			b.Fatalf("followed %d bytes (%v), want %d", k, err, want)
		}
	}
	run := func(b *testing.B, once func(b *testing.B)) {
		start := time.Now()
		for b.Loop() {
			once(b)
		}
		b.ReportMetric(float64(want)*float64(b.N)/(1<<20)/time.Since(start).Seconds(), "MiB/s")
	}
	b.Run("kubectl", func(b *testing.B) {
		run(b, func(b *testing.B) {
			kctx, cancel := context.WithCancel(ctx)
			cmd := exec.CommandContext(kctx, filepath.Join(c.BinDir, "kubectl"), "--kubeconfig", c.AdminKubeconfig(), "-n", "default", "logs", "-f", "writer")
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			follow(b, out, cancel)
			cmd.Wait()
		})
	})
	b.Run("client-go", func(b *testing.B) {
		run(b, func(b *testing.B) {
			sctx, cancel := context.WithCancel(ctx)
			r, err := admin.CoreV1().Pods("default").GetLogs("writer", &v1.PodLogOptions{Follow: true}).Stream(sctx)
			if err != nil {
				b.Fatal(err)
			}
			follow(b, r, func() { cancel(); r.Close() })
		})
	})
	b.Run("direct", func(b *testing.B) {
		run(b, func(b *testing.B) {
			req, _ := http.NewRequest(http.MethodGet, u+"?follow=true", nil)
			resp, err := hc.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			follow(b, resp.Body, func() { resp.Body.Close() })
		})
	})
}

// logDone waits for the log at u (a containerLogs URL), read through c,
// to end in the line "done".
func (n *node) logDone(b *testing.B, c *http.Client, u string) {
	n.waitFor(b, "the log complete", func() bool {
		resp, err := c.Get(u + "?tailLines=1")
		if err != nil {
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(body) == "done\n"
	})
}
