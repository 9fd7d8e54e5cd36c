package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/floor"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine/config"
)

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	// Twice: the first collection moves sync.Pool contents (gRPC's and
	// protobuf's buffers, as many as calls ran at once) to the victim
	// cache, the second frees them.
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// stackInUse is the memory of the goroutine stacks (a worker per pod).
func stackInUse() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.StackInuse)
}

// rssBytes is the process's resident memory (VmRSS).
func rssBytes(tb testing.TB) int64 {
	tb.Helper()
	m, err := harness.ProcStatus(os.Getpid(), "VmRSS")
	if err != nil {
		tb.Fatal(err)
	}
	return m["VmRSS"]
}

// rusage is the process's resource usage so far (getrusage(2)).
func rusage(tb testing.TB) syscall.Rusage {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru
}

// BenchmarkEngineScale starts N pods on the simulated runtime (real gRPC,
// real clock) and waits until all are Running, then removes them all and
// waits until the runtime is empty. It reports the time to all Running
// (s-to-running), the time from the removal's update to an empty runtime
// (s-to-removed; the settling and the heap measurements between the two
// are in neither), transitions per second over those two spans, the live
// heap per pod (after a collection) and the growth
// of the process RSS per pod (engine and simulated runtime share the
// process; RSS only means something in the first run of a process, as Go
// keeps freed memory). The settled heap is taken again once the runtime
// events queued behind the start are handled (waitSettled).
func BenchmarkEngineScale(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run("pods="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				srv, rt := startSim(b)
				benchScale(b, n, rt, srv.Runtime.Len)
			}
		})
	}
}

// BenchmarkEngineScaleRuntimeApart is BenchmarkEngineScale with the
// simulated runtime served from a process of its own (startSimProcess), as
// containerd runs apart from the kubelet: the heap, RSS and GC it reports
// are the engine's and its client's alone.
func BenchmarkEngineScaleRuntimeApart(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run("pods="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				rt, left := startSimProcess(b)
				benchScale(b, n, rt, left)
			}
		})
	}
}

// BenchmarkEngineScaleFloor is BenchmarkEngineScale's floor: the same n
// pods (host network, one busybox container, IfNotPresent) started and
// removed on the same simulated runtime by a client that makes only the
// CRI calls speclet's start makes for each pod (RunPodSandbox,
// ImageStatus, CreateContainer, StartContainer) and writes the same two
// files per container, one goroutine per pod and no state machine
// (cri/floor). Its s-to-running is what those calls alone take on this
// machine. Run each level in a process of its own, as BenchmarkEngineScale,
// so that neither starts on memory the other has freed.
func BenchmarkEngineScaleFloor(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run("pods="+strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				_, rt := startSim(b)
				r, err := floor.Burst(context.Background(), rt, "busybox:latest", n, b.TempDir(), floor.Options{PodFiles: true, ImageStatus: true})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.StartAll.Seconds(), "s-to-running")
				b.ReportMetric(r.RemoveAll.Seconds(), "s-to-removed")
			}
		})
	}
}

// benchScale starts n pods on the runtime rt, waits until all are Running
// and settled, then removes them and waits until left counts no sandbox
// and no container in the runtime.
func benchScale(b *testing.B, n int, rt cri.Runtime, left func() (sandboxes, containers int)) {
	reg := prometheus.NewRegistry()
	// Running pods are counted as the workers publish them (pod i is
	// "p%05d"), not by polling the engine, whose scan of every worker would
	// take CPU from the pods it waits for.
	seen := make([]atomic.Bool, n)
	var running atomic.Int64
	allRunning := make(chan struct{})
	published := func(p *v1.Pod) {
		if p.Status.Phase != v1.PodRunning {
			return
		}
		if i, err := strconv.Atoi(p.Name[1:]); err == nil && i < n && !seen[i].Swap(true) && running.Add(1) == int64(n) {
			close(allRunning)
		}
	}
	e, updates, stop := runBenchEngine(b, Config{Runtime: rt, Registerer: reg, PublishedPod: published})
	defer stop()

	heap0 := liveHeap()
	stack0 := stackInUse()
	rss0 := rssBytes(b)
	faults0 := minorFaults(b)
	stopCPU := profileCPU(b, n, "cpu")
	pods := make([]*v1.Pod, n)
	for i := range pods {
		pods[i] = benchPod(i)
	}
	start := time.Now()
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: pods, Source: config.SourceFile}
	<-allRunning
	toRunning := time.Since(start)
	stopCPU()
	faults1 := minorFaults(b)
	heap1 := liveHeap()
	stack1 := stackInUse()
	rss1 := rssBytes(b)
	profileHeap(b, n, "heap")
	waitSettled(e)
	heap2 := liveHeap()
	profileHeap(b, n, "settled-heap")
	stopCPU = profileCPU(b, n, "remove-cpu")
	removal := time.Now()
	updates <- config.PodUpdate{Op: config.OpRemove, Pods: pods, Source: config.SourceFile}
	for {
		sbs, cs := left()
		if sbs == 0 && cs == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	toRemoved := time.Since(removal)
	stopCPU()
	b.ReportMetric(toRunning.Seconds(), "s-to-running")
	b.ReportMetric(toRemoved.Seconds(), "s-to-removed")
	b.ReportMetric(transitionsTotal(b, reg)/(toRunning+toRemoved).Seconds(), "transitions/s")
	b.ReportMetric(float64(heap1-heap0)/float64(n), "heap-bytes/pod")
	b.ReportMetric(float64(heap2-heap0)/float64(n), "settled-heap-bytes/pod")
	b.ReportMetric(float64(stack1-stack0)/float64(n), "stack-bytes/pod")
	b.ReportMetric(float64(rss1-rss0)/float64(n), "rss-bytes/pod")
	b.ReportMetric(float64(faults1-faults0)/float64(n), "start-faults/pod")
}

// minorFaults is the process's count of minor page faults: the first
// touches of fresh memory (heap, stacks), which BenchmarkPageFault prices.
func minorFaults(b *testing.B) int64 { return rusage(b).Minflt }

// BenchmarkPageFault measures what the first touch of a fresh 4 KiB page
// costs on this machine (an anonymous private mapping, one write per
// page): the price of each of BenchmarkEngineScale's start-faults/pod, and
// of the floor's.
func BenchmarkPageFault(b *testing.B) {
	const size = 64 << 20
	page := os.Getpagesize()
	var pages int
	for b.Loop() {
		m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < size; i += page {
			m[i] = 1
		}
		pages += size / page
		b.StopTimer()
		if err := syscall.Munmap(m); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pages), "ns/page")
}

// profileCPU starts a CPU profile (scale-n-what.pprof: "cpu" over the start
// of n pods, "remove-cpu" over their removal) when SPECLET_PROFILE_DIR
// names a directory, as BenchmarkIdleCost does; the returned function
// stops it.
func profileCPU(b *testing.B, n int, what string) func() {
	dir := os.Getenv("SPECLET_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("scale-%d-%s.pprof", n, what)))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// profileHeap writes a heap profile (as scale-n-what.pprof: "heap" with all
// n pods running, "settled-heap" once settled) when SPECLET_PROFILE_DIR
// names a directory.
func profileHeap(b *testing.B, n int, what string) {
	dir := os.Getenv("SPECLET_PROFILE_DIR")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("scale-%d-%s.pprof", n, what)))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// transitionsTotal sums speclet_transitions_total over every label set in reg.
func transitionsTotal(b *testing.B, reg prometheus.Gatherer) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "speclet_transitions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	if n == 0 {
		b.Fatal("speclet_transitions_total: no transitions recorded")
	}
	return n
}
