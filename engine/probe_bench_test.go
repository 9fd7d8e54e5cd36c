package engine

import (
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/speclet/speclet/engine/config"
)

// BenchmarkProbes runs 100 pods on the simulated runtime (real gRPC, real
// clock), each with an exec liveness probe and an httpGet readiness probe
// (against one HTTP server of the test on 127.0.0.1) at periodSeconds 1,
// waits until all are Ready, and then measures a 10 s window: the CPU the
// process used (engine, simulated runtime and HTTP server share it: an upper
// bound for the engine), its RSS, and the probes run per second.
func BenchmarkProbes(b *testing.B) {
	const n = 100
	const window = 10 * time.Second
	var hits atomic.Int64
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })}
	go func() { _ = hs.Serve(l) }()
	defer hs.Close()
	port := int32(l.Addr().(*net.TCPAddr).Port)

	for b.Loop() {
		srv, rt := startSim(b)
		srv.Runtime.RecordCalls()
		e, updates, stop := runBenchEngine(b, Config{Runtime: rt})

		pods := make([]*v1.Pod, n)
		for i := range pods {
			p := benchPod(i)
			c := &p.Spec.Containers[0]
			c.LivenessProbe = &v1.Probe{PeriodSeconds: 1,
				ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
			c.ReadinessProbe = &v1.Probe{PeriodSeconds: 1,
				ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(port), Path: "/healthz"}}}
			pods[i] = p
		}
		start := time.Now()
		updates <- config.PodUpdate{Op: config.OpAdd, Pods: pods, Source: config.SourceFile}
		for e.countReady() < n {
			if time.Since(start) > 2*time.Minute {
				b.Fatalf("%d of %d pods Ready after 2 min", e.countReady(), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		ready := time.Since(start)

		cpu0, execs0, hits0, t0 := cpuTime(b), srv.Runtime.Calls("ExecSync"), hits.Load(), time.Now()
		time.Sleep(window)
		cpu1, execs1, hits1, t1 := cpuTime(b), srv.Runtime.Calls("ExecSync"), hits.Load(), time.Now()
		rss := rssBytes(b)
		stop()
		wall := t1.Sub(t0).Seconds()
		b.ReportMetric(ready.Seconds(), "s-to-ready")
		b.ReportMetric((cpu1-cpu0).Seconds()/wall, "cores")
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
		b.ReportMetric(float64(execs1-execs0)/wall, "exec-probes/s")
		b.ReportMetric(float64(hits1-hits0)/wall, "http-probes/s")
	}
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime(b *testing.B) time.Duration {
	ru := rusage(b)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// countReady is the number of published pods whose Ready condition is True.
func (e *Engine) countReady() int {
	n := 0
	for _, p := range e.Pods() {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				n++
			}
		}
	}
	return n
}
