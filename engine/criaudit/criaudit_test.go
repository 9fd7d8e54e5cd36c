package criaudit

import (
	"bytes"
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/fsm"
)

// stub answers every call with zero values and counts them.
type stub struct{ calls int }

func (s *stub) Version(context.Context) (*runtimeapi.VersionResponse, error) {
	s.calls++
	return nil, nil
}
func (s *stub) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	s.calls++
	return nil, nil
}
func (s *stub) RunPodSandbox(context.Context, *runtimeapi.PodSandboxConfig, string) (string, error) {
	s.calls++
	return "sb", nil
}
func (s *stub) StopPodSandbox(context.Context, string) error   { s.calls++; return nil }
func (s *stub) RemovePodSandbox(context.Context, string) error { s.calls++; return nil }
func (s *stub) PodSandboxStatus(context.Context, string) (*runtimeapi.PodSandboxStatus, error) {
	s.calls++
	return nil, nil
}
func (s *stub) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	s.calls++
	return nil, nil
}
func (s *stub) CreateContainer(context.Context, string, *runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig) (string, error) {
	s.calls++
	return "c", nil
}
func (s *stub) StartContainer(context.Context, string) error       { s.calls++; return nil }
func (s *stub) StopContainer(context.Context, string, int64) error { s.calls++; return nil }
func (s *stub) RemoveContainer(context.Context, string) error      { s.calls++; return nil }
func (s *stub) ContainerStatus(context.Context, string) (*runtimeapi.ContainerStatus, error) {
	s.calls++
	return nil, nil
}
func (s *stub) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	s.calls++
	return nil, nil
}
func (s *stub) ExecSync(context.Context, string, []string, time.Duration) (cri.ExecResult, error) {
	s.calls++
	return cri.ExecResult{}, nil
}
func (s *stub) GetContainerEvents(context.Context, chan<- *runtimeapi.ContainerEventResponse) error {
	s.calls++
	return nil
}
func (s *stub) PullImage(context.Context, *runtimeapi.ImageSpec, *runtimeapi.AuthConfig, *runtimeapi.PodSandboxConfig) (string, error) {
	s.calls++
	return "ref", nil
}
func (s *stub) ImageStatus(context.Context, *runtimeapi.ImageSpec) (*runtimeapi.Image, error) {
	s.calls++
	return nil, nil
}
func (s *stub) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	s.calls++
	return nil, nil
}
func (s *stub) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	s.calls++
	return nil, nil
}
func (s *stub) RemoveImage(context.Context, *runtimeapi.ImageSpec) error {
	s.calls++
	return nil
}
func (s *stub) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	s.calls++
	return &runtimeapi.ImageFsInfoResponse{}, nil
}
func (s *stub) Exec(context.Context, *runtimeapi.ExecRequest) (string, error) {
	s.calls++
	return "", nil
}
func (s *stub) Attach(context.Context, *runtimeapi.AttachRequest) (string, error) {
	s.calls++
	return "", nil
}
func (s *stub) PortForward(context.Context, *runtimeapi.PortForwardRequest) (string, error) {
	s.calls++
	return "", nil
}
func (s *stub) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	s.calls++
	return nil, nil
}
func (s *stub) ReopenContainerLog(context.Context, string) error { s.calls++; return nil }

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
		args := []reflect.Value{reflect.ValueOf(ctx)}
		for k := 1; k < m.Type.NumIn(); k++ {
			args = append(args, reflect.Zero(m.Type.In(k)))
		}
		fn.Call(args)
	}
	return names
}

// TestRecorderRecordsEveryMethod: every method of cri.Full is forwarded
// once and recorded under its own name with the context's action.
func TestRecorderRecordsEveryMethod(t *testing.T) {
	s := &stub{}
	rec := NewRecorder(s)
	ctx := fsm.WithAction(context.Background(), "pod", "sync_pod")
	names := callAll(t, rec, ctx)
	if s.calls != len(names) {
		t.Fatalf("%d calls forwarded, want %d", s.calls, len(names))
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
	rec := NewLogRecorder(&stub{}, &buf)
	ctx := fsm.WithAction(context.Background(), "container", "pull_image")
	rec.PullImage(ctx, nil, nil, nil)
	rec.ListContainers(context.Background(), nil)
	sctx := fsm.WithAction(context.Background(), "sandbox", "run_sandbox")
	rec.RunPodSandbox(sctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Uid: "u1"}}, "")
	rec.StartContainer(context.Background(), "c1")
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
		{Method: "RunPodSandbox", Machine: "sandbox", Action: "run_sandbox", Pod: "u1", Result: "sb"},
		{Method: "StartContainer", ID: "c1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	if _, err := ReadLog(strings.NewReader("{\"method\":\"X\"}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad line: %v", err)
	}
}

// BenchmarkRecorder measures what the wrapper adds to a call.
func BenchmarkRecorder(b *testing.B) {
	ctx := fsm.WithAction(context.Background(), "container", "start_container")
	b.Run("memory", func(b *testing.B) {
		rec := NewRecorder(&stub{})
		b.ReportAllocs()
		for b.Loop() {
			rec.StartContainer(ctx, "c")
		}
	})
	b.Run("log", func(b *testing.B) {
		rec := NewLogRecorder(&stub{}, discard{})
		b.ReportAllocs()
		for b.Loop() {
			rec.StartContainer(ctx, "c")
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
