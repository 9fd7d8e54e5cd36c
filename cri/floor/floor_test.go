package floor_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
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
			srv, rt := startSim(t, image)
			srv.Runtime.FailCall("StopContainer", tc.stopFails, codes.Unavailable, "ttrpc: closed")

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

// TestBurstImageStatus: with ImageStatus every container start asks the
// runtime for the image once, and a pod whose image the runtime lacks
// fails before its CreateContainer; without it no pod asks.
func TestBurstImageStatus(t *testing.T) {
	const image = "busybox:latest"
	for _, ask := range []bool{false, true} {
		srv, rt := startSim(t, image)
		const n = 3
		if _, err := floor.Burst(context.Background(), rt, image, n, t.TempDir(), floor.Options{ImageStatus: ask}); err != nil {
			t.Fatalf("ImageStatus %v: Burst: %v", ask, err)
		}
		want := 0
		if ask {
			want = n
		}
		if got := srv.Runtime.Calls("ImageStatus"); got != want {
			t.Errorf("ImageStatus %v: %d ImageStatus calls, want %d", ask, got, want)
		}
	}

	srv, rt := startSim(t, image)
	_, err := floor.Burst(context.Background(), rt, "absent:latest", 1, t.TempDir(), floor.Options{ImageStatus: true})
	if err == nil || !strings.Contains(err.Error(), "image absent:latest: not present") {
		t.Errorf("Burst of an absent image: %v, want it not present", err)
	}
	if got := srv.Runtime.Calls("CreateContainer"); got != 0 {
		t.Errorf("%d CreateContainer calls for an absent image, want none", got)
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

// containerConfigs records the configs of every CreateContainer.
type containerConfigs struct {
	cri.Runtime
	mu        sync.Mutex
	got       []*runtimeapi.ContainerConfig
	sandboxes []*runtimeapi.PodSandboxConfig // the sandbox config of each
}

func (s *containerConfigs) CreateContainer(ctx context.Context, sb string, c *runtimeapi.ContainerConfig, sc *runtimeapi.PodSandboxConfig) (string, error) {
	s.mu.Lock()
	s.got = append(s.got, c)
	s.sandboxes = append(s.sandboxes, sc)
	s.mu.Unlock()
	return s.Runtime.CreateContainer(ctx, sb, c, sc)
}

// TestBurstMaskedPaths: every container asks for the masked and read-only
// paths of the options, and none without them; the time of each start call
// is reported.
func TestBurstMaskedPaths(t *testing.T) {
	const image = "busybox:latest"
	client := dialSim(t, image)
	masked, ro := []string{"/proc/kcore", "/sys/firmware"}, []string{"/proc/sys"}
	for _, o := range []floor.Options{{}, {MaskedPaths: masked, ReadonlyPaths: ro}} {
		rt := &containerConfigs{Runtime: client}
		const n = 3
		r, err := floor.Burst(context.Background(), rt, image, n, t.TempDir(), o)
		if err != nil {
			t.Fatalf("Burst: %v", err)
		}
		if len(rt.got) != n {
			t.Fatalf("%d CreateContainer calls, want %d", len(rt.got), n)
		}
		for _, c := range rt.got {
			sc := c.GetLinux().GetSecurityContext()
			if !slices.Equal(sc.GetMaskedPaths(), o.MaskedPaths) || !slices.Equal(sc.GetReadonlyPaths(), o.ReadonlyPaths) {
				t.Errorf("options %+v: container masked %q read-only %q", o, sc.GetMaskedPaths(), sc.GetReadonlyPaths())
			}
		}
		for _, m := range []string{"RunPodSandbox", "CreateContainer", "StartContainer"} {
			if r.CallTime[m] <= 0 {
				t.Errorf("CallTime[%s] = %v, want the time of %d calls", m, r.CallTime[m], n)
			}
		}
	}
}

// TestBurstPodCgroup: with PodCgroup every pod's cgroup is made before its
// sandbox, given as the CgroupParent its container is created under, and
// removed after the sandbox; Resources reach the sandbox and the container.
func TestBurstPodCgroup(t *testing.T) {
	const image = "busybox:latest"
	rt := &containerConfigs{Runtime: dialSim(t, image)}
	var mu sync.Mutex
	made, removed := map[string]bool{}, map[string]bool{}
	o := floor.Options{
		PodCgroup: func(uid string) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			made[uid] = true
			return "/kubepods/besteffort/pod" + uid, nil
		},
		RemovePodCgroup: func(uid string) error {
			mu.Lock()
			defer mu.Unlock()
			removed[uid] = true
			return nil
		},
		Resources: &runtimeapi.LinuxContainerResources{CpuShares: 2, OomScoreAdj: 1000},
	}
	const n = 3
	if _, err := floor.Burst(context.Background(), rt, image, n, t.TempDir(), o); err != nil {
		t.Fatalf("Burst: %v", err)
	}
	if len(made) != n || len(removed) != n {
		t.Fatalf("%d pod cgroups made, %d removed, want %d each", len(made), len(removed), n)
	}
	for uid := range made {
		if !removed[uid] {
			t.Errorf("pod cgroup of %s made, never removed", uid)
		}
	}
	for i, c := range rt.got {
		sc := rt.sandboxes[i]
		if want := "/kubepods/besteffort/pod" + sc.GetMetadata().GetUid(); sc.GetLinux().GetCgroupParent() != want {
			t.Errorf("container %d created in a sandbox with cgroup parent %q, want %q", i, sc.GetLinux().GetCgroupParent(), want)
		}
		if sc.GetLinux().GetResources().GetCpuShares() != 2 || c.GetLinux().GetResources().GetOomScoreAdj() != 1000 {
			t.Errorf("container %d: sandbox resources %v, container resources %v", i, sc.GetLinux().GetResources(), c.GetLinux().GetResources())
		}
	}
}

// dialSim is a client of a simulated runtime holding image, both closed
// when the test ends.
func dialSim(t *testing.T, image string) *cri.Client {
	t.Helper()
	_, rt := startSim(t, image)
	return rt
}

// startSim is dialSim that also returns the runtime's server.
func startSim(t *testing.T, image string) (*sim.Server, *cri.Client) {
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
	return srv, rt
}
