package sim_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri/sim"
)

// runPods creates n pods (a sandbox and one started container each) with
// labels like the engine sets, through gRPC from 8 workers.
func runPods(t testing.TB, f *fixture, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				name := fmt.Sprintf("%s-%05d", prefix, i)
				cfg := &runtimeapi.PodSandboxConfig{
					Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "scale", Uid: "uid-" + name},
					LogDirectory: "/var/log/pods/scale_" + name,
					Labels:       map[string]string{"speclet.io/pod-name": name, "speclet.io/pod-namespace": "scale", "speclet.io/pod-uid": "uid-" + name},
					Annotations:  map[string]string{"speclet.io/config-hash": "0123456789abcdef"},
					Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
						NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
					}},
				}
				sb, err := f.rt.RunPodSandbox(ctx, cfg, "")
				if err != nil {
					errc <- err
					return
				}
				id, err := f.rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
					Metadata:    &runtimeapi.ContainerMetadata{Name: "app"},
					Image:       &runtimeapi.ImageSpec{Image: "busybox:latest"},
					Command:     []string{"/bin/sh", "-c", "while true; do sleep 1; done"},
					LogPath:     "app/0.log",
					Labels:      map[string]string{"speclet.io/pod-uid": "uid-" + name, "speclet.io/container-name": "app"},
					Annotations: map[string]string{"speclet.io/restart-count": "0", "speclet.io/termination-grace": "30"},
				}, cfg)
				if err != nil {
					errc <- err
					return
				}
				if err := f.rt.StartContainer(ctx, id); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case err := <-errc:
			close(next)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestHolds10000Pods runs 10,000 pods in one simulated runtime and checks
// they are all listed, running, with their labels; it reports the heap each
// pod costs.
func TestHolds10000Pods(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 pods: skipped with -short")
	}
	const n = 10000
	f := newFixture(t, sim.Options{})
	before := heapInUse()
	runPods(t, f, "p", n)
	after := heapInUse()
	perPod := float64(after-before) / n
	t.Logf("%d pods: heap %.1f MiB more, %.0f bytes per pod (sandbox + container, runtime and its gRPC client in one process)", n, float64(after-before)/(1<<20), perPod)

	if sbs, cs := f.srv.Runtime.Len(); sbs != n || cs != n {
		t.Fatalf("runtime holds %d sandboxes %d containers, want %d each", sbs, cs, n)
	}
	running, err := f.rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(running) != n {
		t.Fatalf("%d running containers listed, want %d", len(running), n)
	}
	one, err := f.rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"speclet.io/pod-name": "p-04242"}})
	if err != nil || len(one) != 1 || one[0].Metadata.Name != "p-04242" {
		t.Fatalf("sandbox by label: %v %v", one, err)
	}
	// A pod is a few hundred bytes of state; 16 KiB would mean something
	// is retained per pod that should not be (request buffers, goroutines).
	if perPod > 16<<10 {
		t.Errorf("%.0f bytes of heap per pod, want under 16 KiB", perPod)
	}
}

// BenchmarkRunPod measures one pod (RunPodSandbox, CreateContainer,
// StartContainer) through gRPC against a simulated runtime already holding
// the pods of earlier iterations, and reports heap bytes per pod.
func BenchmarkRunPod(b *testing.B) {
	f := newFixture(b, sim.Options{})
	before := heapInUse()
	b.ResetTimer()
	runPods(b, f, fmt.Sprint("b", b.N), b.N)
	b.StopTimer()
	b.ReportMetric(float64(heapInUse()-before)/float64(b.N), "heap-B/pod")
}

// BenchmarkListContainers10k measures a full relist of 10,000 containers,
// what a PLEG relist costs the runtime and the client.
func BenchmarkListContainers10k(b *testing.B) {
	f := newFixture(b, sim.Options{})
	runPods(b, f, "l", 10000)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		l, err := f.rt.ListContainers(ctx, nil)
		if err != nil || len(l) != 10000 {
			b.Fatalf("list: %d %v", len(l), err)
		}
	}
}
