package cri_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/cri/sim"
)

// floorSizes are the burst sizes of BenchmarkFloor.
var floorSizes = []int{30, 100}

// floorGrace is the stop timeout of every container, as a pod with
// terminationGracePeriodSeconds: 1.
const floorGrace = 1

// floorCommand is each pod's only container. busybox sleep as PID 1 has no
// SIGTERM handler, so the kernel ignores the signal and every stop waits the
// full grace period before the kill, as a plain workload does under kubelet.
var floorCommand = []string{"sleep", "3600"}

// BenchmarkFloor is the floor the engine is measured against: a direct CRI
// client starts N host-network pods (RunPodSandbox + CreateContainer +
// StartContainer, image already present) with unlimited parallelism, waits
// until ListContainers shows all N RUNNING, then removes them (StopContainer
// with a 1 s grace, StopPodSandbox, RemovePodSandbox) until ListPodSandbox
// shows none. Each iteration is one whole burst; run it with -benchtime=1x.
//
// Metrics: start-all-s (burst start to all RUNNING), start-p50-s and
// start-p99-s (burst start to each pod's StartContainer return), remove-all-s
// (removal start to no sandbox left), stop-retries (StopContainer errors per
// burst on containers that had stopped anyway or stopped on a second call).
func BenchmarkFloor(b *testing.B) {
	b.Run("containerd", func(b *testing.B) {
		h := harness.ForTest(b)
		rt := dialFloor(b, h.Endpoint)
		for _, n := range floorSizes {
			b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
				benchBurst(b, rt, h.ImageRef(harness.BusyboxRepo), n)
			})
		}
	})
	b.Run("sim", func(b *testing.B) {
		const image = "busybox:latest"
		srv, err := sim.Start(b.TempDir(), sim.Options{Images: []string{image}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(srv.Stop)
		// Like busybox sleep under containerd, the process ignores SIGTERM
		// and is killed when the grace period ends.
		srv.Runtime.OnContainer(sim.Match{}, sim.Behavior{Term: sim.TermIgnored})
		rt := dialFloor(b, srv.Endpoint)
		for _, n := range floorSizes {
			b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
				benchBurst(b, rt, image, n)
			})
		}
	})
}

func dialFloor(b *testing.B, endpoint string) *cri.Client {
	b.Helper()
	rt, err := cri.Dial(context.Background(), endpoint)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	if _, err := rt.Version(context.Background()); err != nil {
		b.Fatal(err)
	}
	return rt
}

// burstResult is one burst's measurements.
type burstResult struct {
	podStart  []time.Duration // per pod: burst start to StartContainer return
	startAll  time.Duration   // burst start to all containers RUNNING
	removeAll time.Duration   // removal start to no sandbox left
	// stopRetries counts StopContainer errors on containers that had in
	// fact stopped, or that a second StopContainer stopped.
	stopRetries int
}

func benchBurst(b *testing.B, rt cri.Runtime, image string, n int) {
	var (
		podStarts           []float64
		startAll, removeAll float64
		stopRetries         int
	)
	for i := 0; i < b.N; i++ {
		r, err := burst(context.Background(), rt, image, n, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range r.podStart {
			podStarts = append(podStarts, d.Seconds())
		}
		startAll += r.startAll.Seconds()
		removeAll += r.removeAll.Seconds()
		stopRetries += r.stopRetries
	}
	sort.Float64s(podStarts)
	b.ReportMetric(startAll/float64(b.N), "start-all-s")
	b.ReportMetric(percentile(podStarts, 0.50), "start-p50-s")
	b.ReportMetric(percentile(podStarts, 0.99), "start-p99-s")
	b.ReportMetric(removeAll/float64(b.N), "remove-all-s")
	b.ReportMetric(float64(stopRetries)/float64(b.N), "stop-retries")
}

// percentile returns the nearest-rank p-quantile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// burst starts n pods at once, waits until all run, and removes them. Pods
// carry a label unique to the burst, so that the runtime may hold other pods.
func burst(ctx context.Context, rt cri.Runtime, image string, n int, logDir string) (burstResult, error) {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return burstResult{}, err
	}
	run := hex.EncodeToString(rnd[:])
	labels := map[string]string{"speclet.floor/run": run}

	type pod struct {
		sandbox, container string
		started            time.Duration
		err                error
	}
	pods := make([]pod, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &pods[i]
			name := fmt.Sprintf("floor-%s-%d", run, i)
			dir := filepath.Join(logDir, name)
			if p.err = os.MkdirAll(dir, 0o755); p.err != nil {
				return
			}
			sc := &runtimeapi.PodSandboxConfig{
				Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "floor", Uid: run + fmt.Sprint(i)},
				Labels:       labels,
				LogDirectory: dir,
				Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
					NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
				}},
			}
			if p.sandbox, p.err = rt.RunPodSandbox(ctx, sc, ""); p.err != nil {
				return
			}
			cc := &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
				Image:    &runtimeapi.ImageSpec{Image: image},
				Command:  floorCommand,
				Labels:   labels,
				LogPath:  "main_0.log",
			}
			if p.container, p.err = rt.CreateContainer(ctx, p.sandbox, cc, sc); p.err != nil {
				return
			}
			if p.err = rt.StartContainer(ctx, p.container); p.err != nil {
				return
			}
			p.started = time.Since(t0)
		}()
	}
	wg.Wait()
	var res burstResult
	var errs []error
	for _, p := range pods {
		errs = append(errs, p.err)
		res.podStart = append(res.podStart, p.started)
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("start burst of %d pods: %w", n, err)
	}
	running := &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: labels,
	}
	for {
		cs, err := rt.ListContainers(ctx, running)
		if err != nil {
			return res, fmt.Errorf("wait for %d running containers: %w", n, err)
		}
		if len(cs) == n {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			return res, fmt.Errorf("wait for %d running containers: %d running after 5 minutes", n, len(cs))
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.startAll = time.Since(t0)

	t1 := time.Now()
	var stopRetries atomic.Int64
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &pods[i]
			if p.err = stopContainer(ctx, rt, p.container, &stopRetries); p.err != nil {
				return
			}
			if p.err = rt.StopPodSandbox(ctx, p.sandbox); p.err != nil {
				return
			}
			p.err = rt.RemovePodSandbox(ctx, p.sandbox)
		}()
	}
	wg.Wait()
	errs = errs[:0]
	for _, p := range pods {
		errs = append(errs, p.err)
	}
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("remove burst of %d pods: %w", n, err)
	}
	left, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: labels})
	if err != nil {
		return res, fmt.Errorf("list sandboxes after removal: %w", err)
	}
	if len(left) > 0 {
		return res, fmt.Errorf("remove burst of %d pods: %d sandboxes left", n, len(left))
	}
	res.removeAll = time.Since(t1)
	res.stopRetries = int(stopRetries.Load())
	return res, nil
}

// stopContainer stops id with the floor's grace, as a kubelet pod worker
// would: containerd 1.6 under load sometimes answers StopContainer with
// "ttrpc: closed" after its shim reported the kill; then the container's
// status decides, and a container still running is stopped again.
func stopContainer(ctx context.Context, rt cri.Runtime, id string, retries *atomic.Int64) error {
	err := rt.StopContainer(ctx, id, floorGrace)
	if err == nil {
		return nil
	}
	st, serr := rt.ContainerStatus(ctx, id)
	if serr == nil && st.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
		retries.Add(1)
		return nil
	}
	retries.Add(1)
	if err2 := rt.StopContainer(ctx, id, floorGrace); err2 != nil {
		return fmt.Errorf("stop container twice: %w; then %w", err, err2)
	}
	return nil
}
