package harness

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestRuntimes starts each runtime of Runtimes (Containerd2's binaries are
// built first when missing) and checks what its CRI says of itself: the
// version of the binary the harness meant to run, RuntimeReady and
// NetworkReady true, and the container event stream (containerd 1.6 answers
// Unimplemented; 2.x streams the events of a pod started meanwhile). It
// logs the features the runtime reports (handlers' recursive read-only
// mounts and user namespaces, supplemental groups policy): what speclet
// may use on it.
func TestRuntimes(t *testing.T) {
	requireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := EnsurePackages(ctx, &testLog{t: t}); err != nil {
		t.Fatal(err)
	}
	for _, rt := range Runtimes {
		t.Run(string(rt), func(t *testing.T) {
			if rt == Containerd2 && !RuntimeBuilt() {
				bctx, bcancel := context.WithTimeout(context.Background(), 40*time.Minute)
				_, err := BuildRuntime(bctx, &testLog{t: t})
				bcancel()
				if err != nil {
					t.Fatal(err)
				}
			}
			leaks := CheckLeaks(t)
			c, err := StartContainerd(ctx, Options{Runtime: rt, Log: &testLog{t: t}})
			if err != nil {
				t.Fatal(err)
			}
			leaks.Gone(c.Dir)
			t.Cleanup(func() {
				if err := c.Stop(); err != nil {
					t.Error(err)
				}
			})
			if c.Runtime != rt {
				t.Errorf("instance runtime %q, want %q", c.Runtime, rt)
			}
			rs, _ := criClient(t, c)
			v, err := rs.Version(ctx, &runtimeapi.VersionRequest{})
			if err != nil {
				t.Fatal(err)
			}
			want := "1.6."
			if rt == Containerd2 {
				want = strings.TrimPrefix(ContainerdVersion, "v")
			}
			if got := strings.TrimPrefix(v.RuntimeVersion, "v"); !strings.HasPrefix(got, want) || v.RuntimeName != "containerd" {
				t.Errorf("Version: %s %s, want containerd %s...", v.RuntimeName, v.RuntimeVersion, want)
			}
			st, err := rs.Status(ctx, &runtimeapi.StatusRequest{})
			if err != nil {
				t.Fatal(err)
			}
			// kubelet reads RuntimeReady and NetworkReady only; 2.x adds
			// ContainerdHasNoDeprecationWarnings, false on this cgroup v1
			// host.
			ready := map[string]bool{}
			for _, cond := range st.Status.GetConditions() {
				ready[cond.Type] = cond.Status
				if !cond.Status {
					t.Logf("%s: condition %s false: %s %s", rt, cond.Type, cond.Reason, cond.Message)
				}
			}
			for _, typ := range []string{runtimeapi.RuntimeReady, runtimeapi.NetworkReady} {
				if !ready[typ] {
					t.Errorf("Status: condition %s not true (%v)", typ, st.Status.GetConditions())
				}
			}
			t.Logf("%s: %s %s (CRI %s); supplemental groups policy %v", rt, v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion, st.GetFeatures().GetSupplementalGroupsPolicy())
			for _, h := range st.RuntimeHandlers {
				t.Logf("%s: handler %q: recursive read-only mounts %v, user namespaces %v", rt, h.Name, h.GetFeatures().GetRecursiveReadOnlyMounts(), h.GetFeatures().GetUserNamespaces())
			}
			if len(st.RuntimeHandlers) == 0 {
				t.Logf("%s: reports no runtime handlers", rt)
			}
			checkEvents(t, rs, c)
		})
	}
}

// checkEvents opens the container event stream and starts a pod: 2.x must
// stream an event of its sandbox, 1.6 must answer Unimplemented.
func checkEvents(t *testing.T, rs runtimeapi.RuntimeServiceClient, c *Containerd) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stream, err := rs.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatalf("GetContainerEvents: %v", err)
	}
	type recv struct {
		ev  *runtimeapi.ContainerEventResponse
		err error
	}
	events := make(chan recv, 64)
	go func() {
		for {
			ev, err := stream.Recv()
			events <- recv{ev, err}
			if err != nil {
				return
			}
		}
	}()
	sb, ctr := pod(t, rs, c, "events", true, "sleep", "3600")
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: no event of sandbox %s or container %s: %v", c.Runtime, sb, ctr, ctx.Err())
		case r := <-events:
			if r.err != nil {
				if c.Runtime == Containerd16 && status.Code(r.err) == codes.Unimplemented {
					t.Logf("%s: GetContainerEvents: %v", c.Runtime, r.err)
					return
				}
				if r.err == io.EOF {
					t.Fatalf("%s: GetContainerEvents ended before an event of sandbox %s", c.Runtime, sb)
				}
				t.Fatalf("%s: GetContainerEvents: %v", c.Runtime, r.err)
			}
			if c.Runtime == Containerd16 {
				t.Fatalf("%s: GetContainerEvents streamed %v, want Unimplemented", c.Runtime, r.ev)
			}
			if r.ev.ContainerId == sb || r.ev.ContainerId == ctr || r.ev.GetPodSandboxStatus().GetId() == sb {
				t.Logf("%s: GetContainerEvents streams: %s of %s", c.Runtime, r.ev.ContainerEventType, r.ev.ContainerId)
				return
			}
		}
	}
}
