package cri_test

import (
	"context"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
)

func simServer(t *testing.T) *sim.Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "speclet-cri-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	srv, err := sim.Start(dir, sim.Options{Images: []string{"busybox:latest"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// PullImage is not bound by the per-call timeout (pulls are long), only by
// its own optional one.
func TestPullImageHasItsOwnTimeout(t *testing.T) {
	srv := simServer(t)
	srv.Runtime.SlowCall("PullImage", 300*time.Millisecond)
	c := dial(t, srv.Endpoint, cri.WithTimeout(50*time.Millisecond))
	if _, err := c.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: "nginx:1"}, nil, nil); err != nil {
		t.Fatalf("a 300 ms pull with a 50 ms call timeout: %v; want success", err)
	}
	c = dial(t, srv.Endpoint, cri.WithPullTimeout(50*time.Millisecond))
	_, err := c.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: "nginx:2"}, nil, nil)
	if !cri.IsDeadlineExceeded(err) {
		t.Fatalf("a 300 ms pull with a 50 ms pull timeout: %v; want ClassDeadlineExceeded", err)
	}
}

// StopContainer's deadline is the call timeout plus the grace period, so a
// grace period longer than the call timeout is honoured.
func TestStopContainerDeadlineCoversTheGracePeriod(t *testing.T) {
	srv := simServer(t)
	srv.Runtime.OnContainer(sim.Match{Name: "stubborn"}, sim.Behavior{Term: sim.TermIgnored})
	c := dial(t, srv.Endpoint, cri.WithTimeout(200*time.Millisecond))
	bg := context.Background()
	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "n", Uid: "u"}}
	sb, err := c.RunPodSandbox(bg, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.CreateContainer(bg, sb, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "stubborn"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartContainer(bg, id); err != nil {
		t.Fatal(err)
	}
	if err := c.StopContainer(bg, id, 1); err != nil {
		t.Fatalf("stop with a 1 s grace period and a 200 ms call timeout: %v; want success", err)
	}
	s, err := c.ContainerStatus(bg, id)
	if err != nil || s.ExitCode != 137 {
		t.Fatalf("after stop: %v %v; want exit code 137", s, err)
	}
}

// ExecSync sends its timeout rounded up to whole seconds, its deadline
// covers that timeout beyond the call timeout, and a command the runtime
// ends at its timeout is ClassDeadlineExceeded.
func TestExecSyncTimeout(t *testing.T) {
	srv := simServer(t)
	srv.Runtime.RecordCalls()
	srv.Runtime.OnContainer(sim.Match{Name: "app"}, sim.Behavior{Exec: []sim.ExecReply{
		{Command: "slow", Delay: 400 * time.Millisecond, Stdout: "done"},
		{Command: "hang", Delay: time.Hour},
	}})
	c := dial(t, srv.Endpoint, cri.WithTimeout(100*time.Millisecond))
	bg := context.Background()
	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "n", Uid: "u"}}
	sb, err := c.RunPodSandbox(bg, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.CreateContainer(bg, sb, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartContainer(bg, id); err != nil {
		t.Fatal(err)
	}
	r, err := c.ExecSync(bg, id, []string{"slow"}, 1500*time.Millisecond)
	if err != nil || string(r.Stdout) != "done" {
		t.Fatalf("a 400 ms command with a 1.5 s timeout and a 100 ms call timeout: %q, %v; want its output", r.Stdout, err)
	}
	_, err = c.ExecSync(bg, id, []string{"hang"}, time.Second)
	if !cri.IsDeadlineExceeded(err) {
		t.Fatalf("a hanging command with a 1 s timeout: %v; want ClassDeadlineExceeded", err)
	}
	var timeouts []int64
	for _, call := range srv.Runtime.CallLog() {
		if call.Method == "ExecSync" {
			timeouts = append(timeouts, call.Timeout)
		}
	}
	if len(timeouts) != 2 || timeouts[0] != 2 || timeouts[1] != 1 {
		t.Errorf("ExecSync timeouts sent = %v, want [2 1] (seconds, rounded up)", timeouts)
	}
}

// eventsUntilCancel opens c's event stream, cancels its context once the
// runtime has the subscriber and returns what GetContainerEvents returned.
func eventsUntilCancel(srv *sim.Server, c *cri.Client) error {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.GetContainerEvents(ctx, make(chan *runtimeapi.ContainerEventResponse, 1)) }()
	for srv.Runtime.Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	return <-errc
}

func TestGetContainerEventsEndsWithItsContext(t *testing.T) {
	srv := simServer(t)
	c := dial(t, srv.Endpoint)
	if err := eventsUntilCancel(srv, c); err != nil {
		t.Errorf("GetContainerEvents after cancel: %v, want nil", err)
	}
	// A runtime that goes away breaks the stream with an error.
	errc2 := make(chan error, 1)
	go func() {
		errc2 <- c.GetContainerEvents(context.Background(), make(chan *runtimeapi.ContainerEventResponse, 1))
	}()
	for srv.Runtime.Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	srv.Stop()
	if err := <-errc2; !cri.IsUnavailable(err) {
		t.Errorf("GetContainerEvents when the runtime stops: %v, want ClassUnavailable", err)
	}
}

// TestMetrics: a client dialed WithMetrics records every gRPC call's
// duration and each failure by CRI method, the event stream's once for its
// life (an error only when it breaks).
func TestMetrics(t *testing.T) {
	srv := simServer(t)
	reg := prometheus.NewPedanticRegistry()
	rt := dial(t, srv.Endpoint, cri.WithMetrics(reg))
	bg := context.Background()
	for range 3 {
		if _, err := rt.Version(bg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rt.ContainerStatus(bg, "nosuch"); !cri.IsNotFound(err) {
		t.Fatalf("status of an unknown id: %v", err)
	}
	// A second client metered on the same registry shares the collectors.
	rt2 := dial(t, srv.Endpoint, cri.WithMetrics(reg))
	if _, err := rt2.ContainerStatus(bg, "nosuch"); err == nil {
		t.Fatal("no error")
	}
	// The calls beyond cri.Runtime (log rotation's, the kubelet API's)
	// are metered too; the simulated runtime has no ReopenContainerLog.
	if err := rt.ReopenContainerLog(bg, "nosuch"); !cri.IsUnimplemented(err) {
		t.Fatalf("ReopenContainerLog on the simulated runtime: %v, want ClassUnimplemented", err)
	}
	// A call the runtime fails.
	srv.Runtime.FailCall("ListImages", 1, codes.Internal, "disk on fire")
	if _, err := rt.ListImages(bg, nil); err == nil {
		t.Fatal("scripted ListImages failure: no error")
	}
	if _, err := rt.ListImages(bg, nil); err != nil {
		t.Fatal(err)
	}
	// The event stream: one ended by its context (no error), one that
	// breaks.
	if err := eventsUntilCancel(srv, rt); err != nil {
		t.Fatalf("GetContainerEvents ended by its context: %v", err)
	}
	srv.Runtime.FailCall("GetContainerEvents", 1, codes.Internal, "broken")
	if err := rt.GetContainerEvents(bg, make(chan *runtimeapi.ContainerEventResponse, 1)); err == nil {
		t.Fatal("scripted GetContainerEvents failure: no error")
	}

	const errorsWant = `
# HELP speclet_runtime_operations_errors_total Number of failed container runtime (CRI) calls, by CRI method.
# TYPE speclet_runtime_operations_errors_total counter
speclet_runtime_operations_errors_total{operation_type="ContainerStatus"} 2
speclet_runtime_operations_errors_total{operation_type="GetContainerEvents"} 1
speclet_runtime_operations_errors_total{operation_type="ListImages"} 1
speclet_runtime_operations_errors_total{operation_type="ReopenContainerLog"} 1
`
	if err := testutil.GatherAndCompare(reg, stringsReader(errorsWant), cri.MetricOperationsErrors); err != nil {
		t.Error(err)
	}
	// The stream's metrics are recorded when it ends, after the client's
	// call returned: wait for them.
	var counts map[string]uint64
	for range 200 {
		if counts = durationCounts(t, reg); counts["GetContainerEvents"] == 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	want := map[string]uint64{"Version": 3, "ContainerStatus": 2, "ReopenContainerLog": 1, "ListImages": 2, "GetContainerEvents": 2}
	if !maps.Equal(counts, want) {
		t.Errorf("duration sample counts %v, want %v", counts, want)
	}
}

// durationCounts returns the sample count of each operation_type of the
// duration histogram.
func durationCounts(t *testing.T, reg prometheus.Gatherer) map[string]uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != cri.MetricOperationsDuration {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation_type" {
					counts[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return counts
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
