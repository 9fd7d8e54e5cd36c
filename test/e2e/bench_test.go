package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/floor"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/cgroups"
	"github.com/speclet/speclet/engine/podspec"
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
// The floor of a pod (podFloor) asks the runtime for what kubelet and
// speclet ask for these pods beyond the bare floor: the hosts and
// termination message files mounted, the sandbox under the runtime's
// default seccomp profile, the default masked and read-only paths, a pod
// cgroup with BestEffort resources: what the same pods cost any agent that
// implements the pod spec as kubelet does.
//
// Metrics (seconds): floor-start-all, floor-remove-all,
// floor-pod-start-all, start-all (manifests written to all Running),
// start-p50 and start-p99 (per pod), remove-all (manifests removed to
// runtime empty), and the ratios start/floor, start/floor-pod and
// remove/floor, and cri-calls/pod-start (the daemon's CRI calls from the
// first manifest written to all Running, per pod). Each burst also logs
// where its time went: the daemon's CPU time, its CRI calls per method with
// their time, the machines' time per state (/metrics), and the floor's
// time in each call. Each iteration runs floor, floor of a pod, speclet,
// speclet, floor of a pod, floor and reports the means; -benchtime=1x is
// enough.
func BenchmarkBurst(b *testing.B) {
	c, d := env(b)
	for _, n := range []int{30, 100} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var floorStart, floorRemove, podStart, start, remove, calls float64
			var perPod []float64
			runFloor := func() {
				r, err := floor.Burst(context.Background(), shared.rt, c.ImageRef(harness.BusyboxRepo), n, b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				floorStart += r.StartAll.Seconds() / 2
				floorRemove += r.RemoveAll.Seconds() / 2
				b.Logf("N=%d floor start: %.1f s, %s", n, r.StartAll.Seconds(), floorCalls(r))
			}
			runFloorPod := func() {
				r, err := floor.Burst(context.Background(), shared.rt, c.ImageRef(harness.BusyboxRepo), n, b.TempDir(), podFloor(b))
				if err != nil {
					b.Fatal(err)
				}
				podStart += r.StartAll.Seconds() / 2
				b.Logf("N=%d floor of a pod start: %.1f s, %s", n, r.StartAll.Seconds(), floorCalls(r))
			}
			spec := func() {
				r := specletBurst(b, c, d, n)
				start += r.startAll.Seconds() / 2
				remove += r.removeAll.Seconds() / 2
				perPod = append(perPod, r.perPod...)
				calls += r.startCalls.total() / float64(n) / 2
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
			b.ReportMetric(calls/k, "cri-calls/pod-start")
		})
	}
}

// burstRound numbers the speclet bursts of the test binary.
var burstRound int

type specletBurstResult struct {
	perPod              []float64 // seconds from the first manifest written to the pod Running on /pods
	startAll, removeAll time.Duration
	startCalls          histSums // CRI calls from the first manifest written to all Running
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
	before, states0, err := d.histograms()
	if err != nil {
		b.Fatal(err)
	}
	cpu0, err := harness.ProcCPU(d.pid())
	if err != nil {
		b.Fatal(err)
	}
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
	after, states1, err := d.histograms()
	if err != nil {
		b.Fatal(err)
	}
	res.startCalls = after.since(before)
	cpu1, err := harness.ProcCPU(d.pid())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("N=%d start: %.1f s, daemon CPU %.1f s, %.1f CRI calls per pod: %s", n, res.startAll.Seconds(), (cpu1 - cpu0).Seconds(), res.startCalls.total()/float64(n), res.startCalls)
	b.Logf("N=%d start: time in the states left: %s", n, states1.since(states0))

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

// histSums is what the daemon's /metrics says of a histogram so far:
// per label set, the number of observations and their sum in seconds. For
// speclet_runtime_operations_duration_seconds the key is the CRI method;
// for speclet_state_duration_seconds it is "machine/state".
type histSums map[string]struct{ n, sec float64 }

// histograms reads the daemon's /metrics and returns the CRI calls so far
// and the time machines spent in each state they left.
func (d *daemon) histograms() (calls, states histSums, err error) {
	resp, err := http.Get(d.base + "/metrics")
	if err != nil {
		return nil, nil, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("GET /metrics: %w", err)
	}
	// operation_type="RunPodSandbox" -> RunPodSandbox;
	// machine="pod",state="running" -> pod/running
	sums := func(name string) histSums {
		out := histSums{}
		for _, m := range families[name].GetMetric() {
			var vals []string
			for _, l := range m.GetLabel() {
				vals = append(vals, l.GetValue())
			}
			h := m.GetHistogram()
			out[strings.Join(vals, "/")] = struct{ n, sec float64 }{float64(h.GetSampleCount()), h.GetSampleSum()}
		}
		return out
	}
	return sums(cri.MetricOperationsDuration), sums("speclet_state_duration_seconds"), nil
}

// since returns the calls made after before was read.
func (c histSums) since(before histSums) histSums {
	out := histSums{}
	for m, v := range c {
		d := struct{ n, sec float64 }{v.n - before[m].n, v.sec - before[m].sec}
		if d.n > 0 {
			out[m] = d
		}
	}
	return out
}

func (c histSums) String() string {
	var b strings.Builder
	for _, m := range slices.Sorted(maps.Keys(c)) {
		fmt.Fprintf(&b, " %s %.0f (%.1f s)", m, c[m].n, c[m].sec)
	}
	return strings.TrimSpace(b.String())
}

func (c histSums) total() float64 {
	n := 0.0
	for _, v := range c {
		n += v.n
	}
	return n
}

// floorCalls prints a floor burst's time in each start call as histSums do.
func floorCalls(r floor.Result) string {
	c := histSums{}
	for m, d := range r.CallTime {
		c[m] = struct{ n, sec float64 }{float64(len(r.PodStart)), d.Seconds()}
	}
	return c.String()
}

// podFloor is the floor of a pod: every pod of the burst asks the runtime
// for what kubelet and speclet ask for the burst's pods (host network,
// BestEffort): the hosts and termination message files mounted, the
// sandbox under RuntimeDefault seccomp, the default masked and read-only
// paths, a pod cgroup under kubepods/besteffort made before the sandbox
// (the daemon's own --cgroups-per-qos hierarchy) and removed after it, 2
// CPU shares and an oom_score_adj of 1000.
func podFloor(b *testing.B) floor.Options {
	m, err := cgroups.New(cgroups.Options{})
	if err != nil {
		b.Fatal(err)
	}
	pod := func(uid string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "floor", Namespace: "floor", UID: types.UID(uid)},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main"}}},
		}
	}
	return floor.Options{
		PodFiles:       true,
		SandboxSeccomp: true,
		MaskedPaths:    podspec.DefaultMaskedPaths(),
		ReadonlyPaths:  podspec.DefaultReadonlyPaths(),
		PodCgroup: func(uid string) (string, error) {
			p := pod(uid)
			return m.Parent(p), m.Ensure(p)
		},
		RemovePodCgroup: func(uid string) error { return m.Remove(types.UID(uid)) },
		Resources:       &runtimeapi.LinuxContainerResources{CpuShares: 2, OomScoreAdj: 1000},
	}
}
