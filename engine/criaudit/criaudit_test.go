package criaudit

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/fsm"
)

// simClient serves the simulated runtime over gRPC and dials it with opts.
func simClient(t testing.TB, opts ...cri.Option) (*sim.Server, *cri.Client) {
	t.Helper()
	srv, err := sim.Start(t.TempDir(), sim.Options{Images: []string{"busybox:latest"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	c, err := cri.Dial(context.Background(), srv.Endpoint, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

// callAll calls every method of cri.Full on rt with ctx and zero values.
func callAll(t *testing.T, rt cri.Full, ctx context.Context) []string {
	t.Helper()
	it := reflect.TypeOf((*cri.Full)(nil)).Elem()
	v := reflect.ValueOf(rt)
	var names []string
	for i := 0; i < it.NumMethod(); i++ {
		m := it.Method(i)
		names = append(names, m.Name)
		fn := v.MethodByName(m.Name)
		cctx := ctx
		if m.Name == "GetContainerEvents" { // a stream: until its context ends
			c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			cctx = c
		}
		args := []reflect.Value{reflect.ValueOf(cctx)}
		for k := 1; k < m.Type.NumIn(); k++ {
			args = append(args, reflect.Zero(m.Type.In(k)))
		}
		fn.Call(args)
	}
	return names
}

// TestRecorderRecordsEveryMethod: every method of cri.Full made through a
// client dialed with the recorder reaches the runtime once and is recorded
// under its own name with the context's action.
func TestRecorderRecordsEveryMethod(t *testing.T) {
	rec := NewRecorder()
	srv, c := simClient(t, rec.DialOption())
	ctx := fsm.WithAction(context.Background(), "pod", "sync_pod")
	names := callAll(t, c, ctx)
	for _, name := range names {
		if n := srv.Runtime.Calls(name); n != 1 {
			t.Errorf("%s reached the runtime %d times, want 1", name, n)
		}
	}
	got := rec.Records()
	if len(got) != len(names) {
		t.Fatalf("%d records, want %d", len(got), len(names))
	}
	for i, r := range got {
		if r.Method != names[i] || r.Machine != "pod" || r.Action != "sync_pod" {
			t.Errorf("record %d = %+v, want %s by pod/sync_pod", i, r, names[i])
		}
	}
}

// TestRecorderRecordsIDs: the ids of each record come from the request and,
// for RunPodSandbox and CreateContainer, the reply; a failed create records
// the error the client returned; the machine and action, or the caller and
// handler, come from the call's context.
func TestRecorderRecordsIDs(t *testing.T) {
	rec := NewRecorder()
	srv, c := simClient(t, rec.DialOption())
	bg := context.Background()
	sctx := fsm.WithAction(bg, "sandbox", "run_sandbox")
	cctx := fsm.WithAction(bg, "container", "create_container")
	hctx := fsm.HandlerKubeletApiPortForward.Tag(bg)
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "n", Uid: "u1"}}
	sb, err := c.RunPodSandbox(sctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	ctrCfg := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox:latest"}}
	id, err := c.CreateContainer(cctx, sb, ctrCfg, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartContainer(bg, id); err != nil {
		t.Fatal(err)
	}
	_, _ = c.PortForward(hctx, &runtimeapi.PortForwardRequest{PodSandboxId: sb})
	if err := c.RemoveImage(bg, &runtimeapi.ImageSpec{Image: "nosuch:1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ImageStatus(bg, &runtimeapi.ImageSpec{Image: "busybox:latest"}); err != nil {
		t.Fatal(err)
	}
	srv.Runtime.FailCall("CreateContainer", 1, codes.Internal, "disk full")
	_, cerr := c.CreateContainer(cctx, sb, ctrCfg, sbCfg)
	if cerr == nil {
		t.Fatal("scripted failure: no error")
	}
	want := []Record{
		{Method: "RunPodSandbox", Machine: "sandbox", Action: "run_sandbox", Pod: "u1", Result: sb},
		{Method: "CreateContainer", Machine: "container", Action: "create_container", Pod: "u1", ID: sb, Result: id},
		{Method: "StartContainer", ID: id},
		{Method: "PortForward", Machine: "kubelet_api", Action: "port_forward", ID: sb},
		{Method: "RemoveImage", ID: "nosuch:1"},
		{Method: "ImageStatus"},
		{Method: "CreateContainer", Machine: "container", Action: "create_container", Pod: "u1", ID: sb, Err: cerr.Error()},
	}
	if got := rec.Records(); !reflect.DeepEqual(got, want) {
		t.Errorf("records:\n%+v\nwant\n%+v", got, want)
	}
}

// TestEveryMethodClassified: each method of cri.Full is either mutating or
// a read, so a method added to the interface must be classified here.
func TestEveryMethodClassified(t *testing.T) {
	it := reflect.TypeOf((*cri.Full)(nil)).Elem()
	n := 0
	for i := 0; i < it.NumMethod(); i++ {
		name := it.Method(i).Name
		if Mutating[name] == Reads[name] {
			t.Errorf("%s: mutating=%v read=%v, want exactly one", name, Mutating[name], Reads[name])
		}
		n++
	}
	if n != len(Mutating)+len(Reads) {
		t.Errorf("cri.Full has %d methods, the lists classify %d", n, len(Mutating)+len(Reads))
	}
}

// TestEveryMachineDeclared: the audit knows every generated machine (the
// fields of fsm.Routed name them).
func TestEveryMachineDeclared(t *testing.T) {
	rt := reflect.TypeOf(fsm.Routed{})
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i).Name
		if strings.HasPrefix(f, "Has") {
			continue
		}
		found := false
		for _, m := range machines() {
			if strings.EqualFold(strings.ReplaceAll(m.name, "_", ""), f) {
				found = true
			}
		}
		if !found {
			t.Errorf("machine %s is not described in criaudit's machines", f)
		}
	}
}

func TestAllowedFollowsCalls(t *testing.T) {
	ms, ok := Allowed("sandbox", "run_sandbox")
	if !ok || !ms["RunPodSandbox"] || !ms["PodSandboxStatus"] || len(ms) != 2 {
		t.Errorf("sandbox/run_sandbox may call %v (ok %v), want RunPodSandbox and PodSandboxStatus", ms, ok)
	}
	if _, ok := Allowed("pod", "no_such"); ok {
		t.Error("Allowed(pod, no_such) ok")
	}
	// The spec's `calls` (an action running another action of its
	// machine) lend the callee's methods, transitively, even in a cycle.
	m := machineDecl{name: "m", byName: map[string]actionDecl{
		"outer":  {cri: []string{"A"}, calls: []string{"middle"}},
		"middle": {cri: []string{"B"}, calls: []string{"inner", "outer"}},
		"inner":  {cri: []string{"C"}},
		"other":  {cri: []string{"D"}},
	}}
	got := m.allowed("outer")
	if len(got) != 3 || !got["A"] || !got["B"] || !got["C"] {
		t.Errorf("outer may call %v, want A, B and C", got)
	}
}

func TestCheck(t *testing.T) {
	recs := []Record{
		{Method: "ListContainers"}, // a read outside: fine
		{Method: "StopContainer"},  // mutating outside
		{Method: "StopContainer"},
		{Method: "StopContainer", Machine: "container", Action: "stop_container"}, // declared
		{Method: "RunPodSandbox", Machine: "sandbox", Action: "run_sandbox"},      // declared
		{Method: "RunPodSandbox", Machine: "pod", Action: "sync_pod"},             // only its sandbox machine may
		{Method: "PullImage", Machine: "container", Action: "create_container"},   // undeclared
		{Method: "Version", Machine: "container", Action: "create_container"},     // undeclared read
		{Method: "Version", Machine: "pod", Action: "nope"},
		// The callers outside the machines (spec/callers.hcl).
		{Method: "Exec", Machine: "kubelet_api", Action: "exec"},                       // declared
		{Method: "ListContainers", Machine: "kubelet_api", Action: "exec"},             // declared read
		{Method: "ReopenContainerLog", Machine: "log_rotation", Action: "rotate_once"}, // declared
		{Method: "Exec", Machine: "kubelet_api", Action: "attach"},                     // another handler's
		{Method: "ContainerStatus", Machine: "kubelet_api", Action: "exec"},            // undeclared read
		{Method: "RemoveContainer", Machine: "kubelet_api", Action: "run"},             // a machine's effect
		{Method: "ReopenContainerLog"},                                                 // mutating outside
		{Method: "PortForward"},                                                        // mutating outside
		{Method: "ListPodSandboxStats"},                                                // a read outside: fine
		{Method: "Exec", Machine: "kubelet_api", Action: "shell"},                      // no such handler
	}
	got := FormatViolations(Check(recs))
	want := []string{
		"outside action  -            -                 PortForward         1",
		"outside action  -            -                 ReopenContainerLog  1",
		"outside action  -            -                 StopContainer       2",
		"undeclared      container    create_container  PullImage           1",
		"undeclared      container    create_container  Version             1",
		"undeclared      kubelet_api  attach            Exec                1",
		"undeclared      kubelet_api  exec              ContainerStatus     1",
		"undeclared      kubelet_api  run               RemoveContainer     1",
		"undeclared      pod          sync_pod          RunPodSandbox       1",
		"unknown action  kubelet_api  shell             Exec                1",
		"unknown action  pod          nope              Version             1",
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")[1:]
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}

func TestUnseen(t *testing.T) {
	for _, decl := range [][]Triple{Declared(), DeclaredHandlers()} {
		var all []Record
		for _, d := range decl {
			all = append(all, Record{Method: d.Method, Machine: d.Machine, Action: d.Action})
		}
		if u := Unseen(all, decl); len(u) != 0 {
			t.Errorf("unseen with every triple recorded:\n%s", FormatUnseen(u))
		}
		u := Unseen(all[1:], decl)
		if len(u) != 1 || u[0] != decl[0] {
			t.Errorf("unseen = %v, want %v", u, decl[0])
		}
	}
}

// TestDeclaredHandlers: the callers' handlers come from spec/callers.hcl,
// each under its caller, apart from the machines' actions.
func TestDeclaredHandlers(t *testing.T) {
	hs := DeclaredHandlers()
	if len(hs) == 0 || hs[0].Machine != fsm.KubeletApiCallerName {
		t.Fatalf("handlers %v, want the kubelet API's first", hs)
	}
	want := Triple{fsm.LogRotationCallerName, fsm.HandlerLogRotationRotateOnce.String(), "ReopenContainerLog"}
	if !slices.Contains(hs, want) {
		t.Errorf("handlers lack %v: %v", want, hs)
	}
	for _, d := range Declared() {
		if d.Machine == fsm.KubeletApiCallerName || d.Machine == fsm.LogRotationCallerName {
			t.Errorf("Declared has a handler's triple %v", d)
		}
	}
	if ms, ok := Allowed(fsm.KubeletApiCallerName, "port_forward"); !ok || !ms["PortForward"] || !ms["ListPodSandbox"] || len(ms) != 2 {
		t.Errorf("kubelet_api/port_forward may call %v (ok %v)", ms, ok)
	}
}

func TestLogRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	rec := NewLogRecorder(&buf)
	_, c := simClient(t, rec.DialOption())
	ctx := fsm.WithAction(context.Background(), "container", "pull_image")
	if _, err := c.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox:latest"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListContainers(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	sctx := fsm.WithAction(context.Background(), "sandbox", "run_sandbox")
	sb, err := c.RunPodSandbox(sctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "n", Uid: "u1"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	_ = c.StartContainer(context.Background(), "c1")
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Records()); n != 0 {
		t.Errorf("log recorder kept %d records in memory", n)
	}
	got, err := ReadLog(&buf)
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{{Method: "PullImage", Machine: "container", Action: "pull_image"}, {Method: "ListContainers"},
		{Method: "RunPodSandbox", Machine: "sandbox", Action: "run_sandbox", Pod: "u1", Result: sb},
		{Method: "StartContainer", ID: "c1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	// A log written before the recorder was a gRPC interceptor reads the
	// same: the lines are unchanged.
	old := `{"method":"PullImage","machine":"container","action":"pull_image"}
{"method":"ListContainers"}
{"method":"RunPodSandbox","machine":"sandbox","action":"run_sandbox","pod":"u1","result":"sb"}
{"method":"StartContainer","id":"c1"}
`
	got, err = ReadLog(strings.NewReader(old))
	want[2].Result = "sb"
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("old log read back %+v, %v; want %+v", got, err, want)
	}
	if _, err := ReadLog(strings.NewReader("{\"method\":\"X\"}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad line: %v", err)
	}
}

// BenchmarkRecorder measures what the recorder's interceptor adds to a
// call (the call itself is a no-op invoker).
func BenchmarkRecorder(b *testing.B) {
	ctx := fsm.WithAction(context.Background(), "container", "start_container")
	req, reply := &runtimeapi.StartContainerRequest{ContainerId: "c"}, &runtimeapi.StartContainerResponse{}
	invoke := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	const method = "/runtime.v1.RuntimeService/StartContainer"
	b.Run("memory", func(b *testing.B) {
		rec := NewRecorder()
		b.ReportAllocs()
		for b.Loop() {
			_ = rec.unary(ctx, method, req, reply, nil, invoke)
		}
	})
	b.Run("log", func(b *testing.B) {
		rec := NewLogRecorder(discard{})
		b.ReportAllocs()
		for b.Loop() {
			_ = rec.unary(ctx, method, req, reply, nil, invoke)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
