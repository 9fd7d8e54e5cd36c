package floor_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/floor"
	"github.com/speclet/speclet/cri/sim"
)

func TestBurstOnSim(t *testing.T) {
	const image = "busybox:latest"
	for _, tc := range []struct {
		name        string
		stopFails   int // StopContainer calls that fail without stopping
		wantRetries int
	}{
		{name: "clean", stopFails: 0, wantRetries: 0},
		{name: "stop dropped once", stopFails: 1, wantRetries: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := sim.Start(t.TempDir(), sim.Options{Images: []string{image}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Stop)
			srv.Runtime.FailCall("StopContainer", tc.stopFails, codes.Unavailable, "ttrpc: closed")
			rt, err := cri.Dial(context.Background(), srv.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rt.Close() })

			const n = 3
			r, err := floor.Burst(context.Background(), rt, image, n, t.TempDir())
			if err != nil {
				t.Fatalf("Burst: %v", err)
			}
			if len(r.PodStart) != n {
				t.Fatalf("PodStart has %d entries, want %d", len(r.PodStart), n)
			}
			for i, d := range r.PodStart {
				if d <= 0 || d > r.StartAll {
					t.Errorf("PodStart[%d] = %v, want in (0, StartAll=%v]", i, d, r.StartAll)
				}
			}
			if r.RemoveAll <= 0 {
				t.Errorf("RemoveAll = %v, want > 0", r.RemoveAll)
			}
			if r.StopRetries != tc.wantRetries {
				t.Errorf("StopRetries = %d, want %d", r.StopRetries, tc.wantRetries)
			}
			if got := srv.Runtime.Calls("StopContainer"); got != n+tc.stopFails {
				t.Errorf("StopContainer calls = %d, want %d", got, n+tc.stopFails)
			}
			if sbs, cs := srv.Runtime.Len(); sbs != 0 || cs != 0 {
				t.Errorf("runtime holds %d sandboxes and %d containers after the burst, want none", sbs, cs)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	sorted := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		p    float64
		want float64
	}{{0.5, 5}, {0.99, 10}, {0.1, 1}, {1, 10}} {
		if got := floor.Percentile(sorted, tc.p); got != tc.want {
			t.Errorf("Percentile(1..10, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := floor.Percentile(nil, 0.5); got != 0 {
		t.Errorf("Percentile(nil) = %v, want 0", got)
	}
}

// TestBurstPodFiles: with PodFiles every pod's directory holds the hosts
// and termination message files its container mounted.
func TestBurstPodFiles(t *testing.T) {
	const image = "busybox:latest"
	rt := dialSim(t, image)
	logs := t.TempDir()
	const n = 3
	if _, err := floor.Burst(context.Background(), rt, image, n, logs, floor.Options{PodFiles: true}); err != nil {
		t.Fatalf("Burst: %v", err)
	}
	for _, name := range []string{"etc-hosts", "termination-log"} {
		files, err := filepath.Glob(filepath.Join(logs, "floor-*", name))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != n {
			t.Errorf("%d pods have a %s file, want %d", len(files), name, n)
		}
	}
}

// sandboxConfigs records the config of every RunPodSandbox.
type sandboxConfigs struct {
	cri.Runtime
	mu  sync.Mutex
	got []*runtimeapi.PodSandboxConfig
}

func (s *sandboxConfigs) RunPodSandbox(ctx context.Context, c *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	s.mu.Lock()
	s.got = append(s.got, c)
	s.mu.Unlock()
	return s.Runtime.RunPodSandbox(ctx, c, handler)
}

// TestBurstSandboxSeccomp: with SandboxSeccomp every sandbox asks for the
// runtime's default seccomp profile; without it none asks for a profile.
func TestBurstSandboxSeccomp(t *testing.T) {
	const image = "busybox:latest"
	client := dialSim(t, image)
	for _, seccomp := range []bool{false, true} {
		rt := &sandboxConfigs{Runtime: client}
		const n = 3
		if _, err := floor.Burst(context.Background(), rt, image, n, t.TempDir(), floor.Options{SandboxSeccomp: seccomp}); err != nil {
			t.Fatalf("Burst: %v", err)
		}
		if len(rt.got) != n {
			t.Fatalf("%d RunPodSandbox calls, want %d", len(rt.got), n)
		}
		for _, c := range rt.got {
			p := c.GetLinux().GetSecurityContext().GetSeccomp()
			if got := p != nil && p.GetProfileType() == runtimeapi.SecurityProfile_RuntimeDefault; got != seccomp {
				t.Errorf("SandboxSeccomp %v: sandbox %s seccomp %v", seccomp, c.GetMetadata().GetName(), p)
			}
		}
	}
}

// dialSim is a client of a simulated runtime holding image, both closed
// when the test ends.
func dialSim(t *testing.T, image string) *cri.Client {
	t.Helper()
	srv, err := sim.Start(t.TempDir(), sim.Options{Images: []string{image}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	rt, err := cri.Dial(context.Background(), srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}
