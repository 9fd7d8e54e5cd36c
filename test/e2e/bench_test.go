package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/speclet/speclet/cri/floor"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
)

// BenchmarkBurst measures speclet on real containerd against the direct-CRI
// floor, in the same run: N host-network busybox pods (one container running
// `sleep 3600`, which ignores SIGTERM, grace period 1 s) are started at once
// and then removed.
//
// Floor: a direct CRI client with unlimited parallelism (RunPodSandbox,
// CreateContainer, StartContainer), until ListContainers shows all N
// running; then StopContainer (1 s), StopPodSandbox and RemovePodSandbox
// until no sandbox is left. Speclet: N manifests written to the daemon's
// --pod-manifest-path until GET /pods shows all N Running; then the manifests
// removed until the runtime holds no container or sandbox of them.
//
// The floor of a pod (floor.Options PodFiles and SandboxSeccomp) also
// bind-mounts the hosts file and the termination message file that kubelet
// and speclet give every container, and runs each sandbox under the
// runtime's default seccomp profile as both ask for every sandbox: what the
// same pods cost any agent that implements the pod spec as kubelet does.
//
// Metrics (seconds): floor-start-all, floor-remove-all,
// floor-pod-start-all, start-all (manifests written to all Running),
// start-p50 and start-p99 (per pod), remove-all (manifests removed to
// runtime empty), and the ratios start/floor, start/floor-pod and
// remove/floor. Each iteration runs floor, floor of a pod, speclet,
// speclet, floor of a pod, floor and reports the means; -benchtime=1x is
// enough.
func BenchmarkBurst(b *testing.B) {
	c, d := env(b)
	for _, n := range []int{30, 100} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var floorStart, floorRemove, podStart, start, remove float64
			var perPod []float64
			runFloor := func() {
				r, err := floor.Burst(context.Background(), shared.rt, c.ImageRef(harness.BusyboxRepo), n, b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				floorStart += r.StartAll.Seconds() / 2
				floorRemove += r.RemoveAll.Seconds() / 2
			}
			runFloorPod := func() {
				r, err := floor.Burst(context.Background(), shared.rt, c.ImageRef(harness.BusyboxRepo), n, b.TempDir(), floor.Options{PodFiles: true, SandboxSeccomp: true})
				if err != nil {
					b.Fatal(err)
				}
				podStart += r.StartAll.Seconds() / 2
			}
			spec := func() {
				r := specletBurst(b, c, d, n)
				start += r.startAll.Seconds() / 2
				remove += r.removeAll.Seconds() / 2
				perPod = append(perPod, r.perPod...)
			}
			for i := 0; i < b.N; i++ {
				// floor, floor of a pod, speclet, speclet, floor of a
				// pod, floor: no side always meets a containerd warmed
				// (or burdened) by another.
				runFloor()
				runFloorPod()
				spec()
				spec()
				runFloorPod()
				runFloor()
			}
			sort.Float64s(perPod)
			k := float64(b.N)
			b.ReportMetric(floorStart/k, "floor-start-all-s")
			b.ReportMetric(floorRemove/k, "floor-remove-all-s")
			b.ReportMetric(start/k, "start-all-s")
			b.ReportMetric(floor.Percentile(perPod, 0.50), "start-p50-s")
			b.ReportMetric(floor.Percentile(perPod, 0.99), "start-p99-s")
			b.ReportMetric(remove/k, "remove-all-s")
			b.ReportMetric(podStart/k, "floor-pod-start-all-s")
			b.ReportMetric(start/floorStart, "start/floor")
			b.ReportMetric(start/podStart, "start/floor-pod")
			b.ReportMetric(remove/floorRemove, "remove/floor")
		})
	}
}

// burstRound numbers the speclet bursts of the test binary.
var burstRound int

type specletBurstResult struct {
	perPod              []float64 // seconds from the first manifest written to the pod Running on /pods
	startAll, removeAll time.Duration
}

func specletBurst(b *testing.B, c *harness.Containerd, d *daemon, n int) specletBurstResult {
	b.Helper()
	// Names (and so UIDs) new to the daemon: a UID removed a moment ago is
	// not started again until the engine has purged it.
	burstRound++
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("burst-%d-%03d", burstRound, i)
	}
	manifest := func(name string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n"+
			"  containers:\n  - name: main\n    image: %s\n    imagePullPolicy: IfNotPresent\n    command: [sleep, \"3600\"]\n",
			name, c.ImageRef(harness.BusyboxRepo))
	}
	var res specletBurstResult
	t0 := time.Now()
	for _, name := range names {
		tmp := filepath.Join(d.manifests, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(manifest(name)), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(d.manifests, name+".yaml")); err != nil {
			b.Fatal(err)
		}
	}
	running := map[string]time.Duration{}
	for len(running) < n {
		if time.Since(t0) > 5*time.Minute {
			b.Fatalf("only %d of %d burst pods Running after 5 minutes", len(running), n)
		}
		list, err := d.tryPods()
		if err != nil {
			b.Fatal(err)
		}
		now := time.Since(t0)
		for i := range list {
			p := &list[i]
			if strings.HasPrefix(p.Name, "burst-") && isRunning(p) {
				if _, ok := running[p.Name]; !ok {
					running[p.Name] = now
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, v := range running {
		res.perPod = append(res.perPod, v.Seconds())
		res.startAll = max(res.startAll, v)
	}
	sort.Float64s(res.perPod)

	t1 := time.Now()
	for _, name := range names {
		if err := os.Remove(filepath.Join(d.manifests, name+".yaml")); err != nil {
			b.Fatal(err)
		}
	}
	for {
		left, err := burstObjects()
		if err != nil {
			b.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Since(t1) > 5*time.Minute {
			b.Fatalf("%d burst containers and sandboxes left 5 minutes after removal", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	res.removeAll = time.Since(t1)
	return res
}

// burstObjects counts the containers and sandboxes of burst pods in the runtime.
func burstObjects() (int, error) {
	ctx := context.Background()
	cs, err := shared.rt.ListContainers(ctx, nil)
	if err != nil {
		return 0, err
	}
	sbs, err := shared.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range cs {
		if strings.HasPrefix(c.Labels[engine.LabelPodName], "burst-") {
			n++
		}
	}
	for _, s := range sbs {
		if strings.HasPrefix(s.Labels[engine.LabelPodName], "burst-") {
			n++
		}
	}
	return n, nil
}
