package conformance

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/harness"
)

// probeCostPods, probeCostWindow: the load of BenchmarkProbeCost and how
// long its CPU is measured once every pod is Ready.
const (
	probeCostPods   = 100
	probeCostWindow = 30 * time.Second
)

// BenchmarkProbeCost measures what probes cost an agent on real containerd:
// probeCostPods hostNetwork pods, each a busybox httpd on its own port of
// 127.0.0.1 with an exec liveness probe (`true`) and an httpGet readiness
// probe (to its httpd), both at periodSeconds 1. Once GET /pods shows every
// pod Running, the agent process's CPU (utime+stime from /proc/PID/stat) is
// measured over probeCostWindow, and its RSS at the end; the pods Ready at
// the end are reported (a machine that cannot run 100 execs a second makes
// exec probes time out, for either agent). speclet runs at its
// default log level; kubelet (from $SPECLET_KUBELET, as `make bench` sets it
// from the conformance harness's cached build) with the harness's flags
// (--v 2), one agent after the other, each on its own containerd.
//
// Metrics: speclet-cores, speclet-rss-MiB, speclet-running-s (manifests
// written to all Running), speclet-ready-pods (at the end), the same for
// kubelet, and kubelet/speclet-cpu.
func BenchmarkProbeCost(b *testing.B) { agentCost(b, probeCostPod, true, false) }

// agentCost runs one cost benchmark: speclet, then kubelet when
// $SPECLET_KUBELET names it, each on its own containerd with probeCostPods
// pods made by pod, and reports each agent's metrics (the Ready pods at the
// end when readyPods) and kubelet/speclet-cpu; with floor, also
// relist-floor-cores (relistFloor on speclet's containerd).
func agentCost(b *testing.B, pod func(i int, image string, port int) string, readyPods, floor bool) {
	if os.Geteuid() != 0 {
		b.Skipf("%s runs containerd and the agents and needs root", b.Name())
	}
	reg, _ := setup(b)
	speclet := buildSpeclet(b)
	kubelet := os.Getenv("SPECLET_KUBELET")
	report := func(agent string, r probeCostResult) {
		b.ReportMetric(r.cores, agent+"-cores")
		b.ReportMetric(r.rssMiB, agent+"-rss-MiB")
		b.ReportMetric(r.ready.Seconds(), agent+"-running-s")
		if readyPods {
			b.ReportMetric(float64(r.readyPods), agent+"-ready-pods")
		}
	}
	for b.Loop() {
		s := probeCost(b, Speclet, speclet, reg, pod, floor, "-v", "0")
		report("speclet", s)
		if floor {
			b.ReportMetric(s.floorCores, "relist-floor-cores")
		}
		if kubelet == "" {
			b.Log("SPECLET_KUBELET not set: kubelet not measured (make bench builds it)")
			continue
		}
		k := probeCost(b, Kubelet, kubelet, reg, pod, false)
		report("kubelet", k)
		b.ReportMetric(k.cores/s.cores, "kubelet/speclet-cpu")
	}
}

type probeCostResult struct {
	cores, rssMiB       float64
	ready               time.Duration // manifests written to all Running
	readyPods, restarts int           // at the end of the window
	floorCores          float64       // relistFloor's, when asked
}

// probeCost starts the agent kind from bin on its own containerd, writes
// probeCostPods manifests made by pod (its index, the busybox image and a
// free port of 127.0.0.1), waits for all of them Running, and measures the
// agent over probeCostWindow.
func probeCost(b *testing.B, kind AgentKind, bin string, reg *harness.Registry, pod func(i int, image string, port int) string, floor bool, extra ...string) probeCostResult {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	profDir := os.Getenv("SPECLET_PROFILE_DIR")
	if profDir != "" && kind == Speclet {
		extra = append(extra, "--enable-profiling")
	}
	a, err := StartAgent(ctx, kind, bin, reg, nil, extra...)
	if err != nil {
		b.Fatalf("start %s: %v", kind, err)
	}
	defer func() {
		if err := a.Stop(); err != nil {
			b.Error(err)
		}
	}()
	image := reg.Ref(harness.BusyboxRepo)
	t0 := time.Now()
	for i := range probeCostPods {
		port, err := freePort()
		if err != nil {
			b.Fatal(err)
		}
		if err := writeAtomic(a.Manifests, fmt.Sprintf("probe-%d.yaml", i), pod(i, image, port)); err != nil {
			b.Fatal(err)
		}
	}
	for {
		pods, err := a.Pods()
		running := 0
		for i := range pods {
			if pods[i].Status.Phase == v1.PodRunning {
				running++
			}
		}
		if err == nil && running == probeCostPods {
			break
		}
		if time.Since(t0) > 10*time.Minute {
			b.Fatalf("%s: %d of %d pods Running after 10 min (%v); log:\n%s", kind, running, probeCostPods, err, a.LogTail(30))
		}
		time.Sleep(500 * time.Millisecond)
	}
	res := probeCostResult{ready: time.Since(t0)}
	time.Sleep(5 * time.Second) // the start-up work settles
	pid := a.cmd.Process.Pid
	cpu0, err := harness.ProcCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	w0 := time.Now()
	profiled := make(chan error, 1)
	if profDir != "" && kind == Speclet {
		go func() { profiled <- a.saveProfile(b.Name(), profDir, probeCostWindow) }()
	} else {
		profiled <- nil
	}
	time.Sleep(probeCostWindow)
	cpu1, err := harness.ProcCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	if err := <-profiled; err != nil {
		b.Error(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	res.cores = (cpu1 - cpu0).Seconds() / time.Since(w0).Seconds()
	mem, err := harness.ProcStatus(pid, "VmRSS", "RssAnon", "RssFile")
	if err != nil {
		b.Fatal(err)
	}
	res.rssMiB = float64(mem["VmRSS"]) / (1 << 20)
	// The anonymous part is the agent's heap and stacks; the file part is
	// mostly its binary's pages.
	b.Logf("%s: RSS %.1f MiB = %.1f MiB anonymous + %.1f MiB file", kind, res.rssMiB,
		float64(mem["RssAnon"])/(1<<20), float64(mem["RssFile"])/(1<<20))
	// How many pods are Ready and how many restarts the liveness probes
	// caused: on a machine that cannot run 100 exec probes a second, exec
	// probes time out, fail and restart containers, for either agent.
	pods, err := a.Pods()
	if err != nil {
		b.Fatal(err)
	}
	for i := range pods {
		for _, c := range pods[i].Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				res.readyPods++
			}
		}
		for _, cs := range pods[i].Status.ContainerStatuses {
			res.restarts += int(cs.RestartCount)
		}
	}
	b.Logf("%s: %d pods Running in %.1fs; %.3f cores, RSS %.0f MiB over %s; at the end %d Ready, %d restarts", kind, probeCostPods,
		res.ready.Seconds(), res.cores, res.rssMiB, probeCostWindow, res.readyPods, res.restarts)
	if floor {
		if res.floorCores, err = relistFloor(ctx, a.RT, probeCostWindow); err != nil {
			b.Fatal(err)
		}
		b.Logf("relist floor on %s's containerd: %.4f cores over %s", kind, res.floorCores, probeCostWindow)
	}
	return res
}

// relistFloor measures what the runtime calls an agent on this containerd
// cannot avoid cost the process that makes them: kubelet's generic PLEG
// relist (ListPodSandbox and ListContainers every second: containerd 1.6
// streams no container events) and its runtime check (Status every 5 s,
// kubelet's updateRuntimeUp), through rt, speclet's CRI client with its
// interceptors, for window. It returns this process's cores over the
// window: the benchmark's process does nothing else meanwhile (its registry
// and hook server are idle), while the agent keeps running beside it.
func relistFloor(ctx context.Context, rt *cri.Client, window time.Duration) (float64, error) {
	pid := os.Getpid()
	cpu0, err := harness.ProcCPU(pid)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	relist, status := time.NewTicker(time.Second), time.NewTicker(5*time.Second)
	defer relist.Stop()
	defer status.Stop()
	end := time.After(window)
	for done := false; !done; {
		select {
		case <-end:
			done = true
		case <-relist.C:
			if _, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{}); err != nil {
				return 0, fmt.Errorf("relist floor: %w", err)
			}
			if _, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{}); err != nil {
				return 0, fmt.Errorf("relist floor: %w", err)
			}
		case <-status.C:
			if _, err := rt.Status(ctx, false); err != nil {
				return 0, fmt.Errorf("relist floor: %w", err)
			}
		}
	}
	cpu1, err := harness.ProcCPU(pid)
	if err != nil {
		return 0, err
	}
	return (cpu1 - cpu0).Seconds() / time.Since(t0).Seconds(), nil
}

func probeCostPod(i int, image string, port int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: probe-%d
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 127.0.0.1:%d -h /www"]
    livenessProbe:
      exec:
        command: ["true"]
      periodSeconds: 1
    readinessProbe:
      httpGet:
        host: 127.0.0.1
        port: %d
        path: /index.html
      periodSeconds: 1
`, i, image, port, port)
}

// saveProfile writes the agent's CPU profile over window, and its heap
// profile after it, to dir as NAME-cpu.pprof and NAME-heap.pprof (the agent
// runs with --enable-profiling).
func (a *Agent) saveProfile(name, dir string, window time.Duration) error {
	name = strings.ReplaceAll(name, "/", "_")
	for _, p := range []struct{ path, file string }{
		{fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(window.Seconds())), name + "-cpu.pprof"},
		{"/debug/pprof/heap", name + "-heap.pprof"},
	} {
		resp, err := http.Get(a.Base + p.path)
		if err != nil {
			return fmt.Errorf("profile %s: %w", p.path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %s", resp.Status)
		}
		if err != nil {
			return fmt.Errorf("profile %s: %w", p.path, err)
		}
		if err := os.WriteFile(filepath.Join(dir, p.file), body, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkIdleCost measures what an agent costs while its pods just run:
// probeCostPods pods on real containerd, each one busybox container that
// sleeps, with no probe, no volume and no host network. Measured as
// BenchmarkProbeCost measures (the agent process's CPU over probeCostWindow
// once every pod is Running and 5 s more, its RSS at the end), speclet at
// its default log level, then kubelet from $SPECLET_KUBELET when set.
// What is left is the agent's own periodic work: the relist, the pod
// workers' sync, the status refresh, the eviction and garbage collection
// passes, and the runtime's health check.
//
// relist-floor-cores is what the calls no agent on containerd 1.6 can skip
// cost by themselves (relistFloor), measured after speclet's window on its
// containerd.
//
// Metrics: speclet-cores, speclet-rss-MiB, speclet-running-s, the same for
// kubelet, kubelet/speclet-cpu and relist-floor-cores.
func BenchmarkIdleCost(b *testing.B) { agentCost(b, idlePod, false, true) }

// idlePod is one pod of BenchmarkIdleCost: a busybox container that sleeps.
func idlePod(i int, image string, _ int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: idle-%d
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: sleep
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
`, i, image)
}
