package spec

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var update = flag.Bool("update", false, "rewrite the expected diagnostics in testdata/invalid/*.diag")

func TestEmbeddedSpecIsValid(t *testing.T) {
	s, diags := Parse(Embedded())
	for _, d := range diags {
		t.Errorf("%s", Line(d))
	}
	for name, states := range map[string][]string{
		"pod":       {"waiting_to_start", "syncing", "terminating", "terminated", "finished"},
		"container": {"waiting", "checking_image", "pulling", "pull_backoff", "creating", "starting", "running", "exited", "restarting", "crashloop_backoff", "stopping", "terminated", "removed"},
	} {
		m := s.Machine(name)
		if m == nil {
			t.Errorf("no machine %q", name)
			continue
		}
		for _, st := range states {
			if m.State(st) == nil {
				t.Errorf("machine %q has no state %q", name, st)
			}
		}
	}
	if f := s.Machine("pod").State("finished"); f == nil || !f.Final {
		t.Error("pod state finished must be final")
	}
}

// TestRoutesCoverEveryInput checks that the spec routes each channel input
// the engine has: config ops, runtime events, ticks and probe results.
func TestRoutesCoverEveryInput(t *testing.T) {
	s, diags := Parse(Embedded())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var got []string
	for _, in := range s.Inputs {
		got = append(got, in.Name)
	}
	for _, want := range []string{
		"config_add", "config_update", "config_remove", "config_delete", "config_reconcile", "config_restore",
		"container_started", "container_died", "container_removed", "container_changed",
		"sync_tick", "liveness_failed", "startup_succeeded", "startup_failed",
		"readiness_succeeded", "readiness_failed",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("routes.hcl has no input %q", want)
		}
	}
}

// TestInvalidCorpus parses each testdata/invalid/*.hcl and compares its
// diagnostics, one Line each, with NAME.diag (-update rewrites them). Every
// file must fail with a positioned error.
func TestInvalidCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no invalid corpus: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".hcl"), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			_, diags := Parse([]File{{Name: f, Src: src}})
			if !diags.HasErrors() {
				t.Fatalf("%s: accepted, want an error", f)
			}
			var lines []string
			for _, d := range diags {
				if d.Severity == hcl.DiagError && (d.Subject == nil || d.Subject.Filename != f || d.Subject.Start.Line < 1) {
					t.Errorf("error without a position in %s: %s", f, Line(d))
				}
				lines = append(lines, Line(d))
			}
			got := strings.Join(lines, "\n") + "\n"
			golden := strings.TrimSuffix(f, ".hcl") + ".diag"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./spec -run TestInvalidCorpus -update)", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics of %s:\n%s\nwant (%s):\n%s", f, got, golden, want)
			}
		})
	}
}

func TestValidCorpus(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.hcl")
	if len(files) == 0 {
		t.Fatal("no valid corpus")
	}
	for _, f := range files {
		fs, err := ReadFiles(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, diags := Parse(fs); len(diags) > 0 {
			for _, d := range diags {
				t.Errorf("%s", Line(d))
			}
		}
	}
}

// TestCRIMethodsMatchCRIAPI checks the generated list against the
// RuntimeService and ImageService of k8s.io/cri-api.
func TestCRIMethodsMatchCRIAPI(t *testing.T) {
	var want []string
	for _, typ := range []reflect.Type{
		reflect.TypeFor[runtimeapi.RuntimeServiceClient](),
		reflect.TypeFor[runtimeapi.ImageServiceClient](),
	} {
		for i := 0; i < typ.NumMethod(); i++ {
			want = append(want, typ.Method(i).Name)
		}
	}
	slices.Sort(want)
	if !slices.Equal(CRIMethods(), want) {
		t.Errorf("crimethods_gen.go is stale; run go generate ./spec\n got %v\nwant %v", CRIMethods(), want)
	}
	for _, m := range []string{"RunPodSandbox", "PullImage", "StopContainer"} {
		if !IsCRIMethod(m) {
			t.Errorf("IsCRIMethod(%q) = false", m)
		}
	}
	if IsCRIMethod("StartContianer") {
		t.Error("IsCRIMethod accepts a misspelt name")
	}
}

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{"waiting_to_start": "WaitingToStart", "kill": "Kill", "sync_ok": "SyncOk", "a1b": "A1b"} {
		if got := GoName(in); got != want {
			t.Errorf("GoName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSuggestion: an unknown reference names the closest declared one.
func TestSuggestion(t *testing.T) {
	src := []byte(`machine "m" {
  initial = state.runing
  event "go" {}
  state "running" {
    transition "go" { to = state.done }
  }
  state "done" { final = true }
}
`)
	_, diags := Parse([]File{{Name: "m.hcl", Src: src}})
	if len(diags) != 1 {
		t.Fatalf("diags = %v, want one", diags)
	}
	if got := Line(diags[0]); got != `m.hcl:2:13: error: Unknown state: initial refers to state "runing", which is not declared. Did you mean "running"?` {
		t.Errorf("got %s", got)
	}
}

// FuzzDecode: any input either parses into a spec whose references all
// resolve, or fails with positioned errors; it never panics.
func FuzzDecode(f *testing.F) {
	// Small seeds only: the fuzzer minimizes every input that finds new
	// coverage, and minimizing the full spec files takes longer than the
	// 10 s `make test` gives it.
	seeds, _ := filepath.Glob("testdata/*/*.hcl")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		s, diags := Parse([]File{{Name: "fuzz.hcl", Src: src}})
		if s == nil {
			t.Fatal("Parse returned a nil spec")
		}
		if diags.HasErrors() {
			for _, d := range diags {
				if d.Severity == hcl.DiagError && d.Subject != nil && d.Subject.Filename != "fuzz.hcl" {
					t.Fatalf("diagnostic names another file: %s", Line(d))
				}
			}
			return
		}
		for _, m := range s.Machines {
			if m.State(m.Initial.Name) == nil {
				t.Fatalf("valid spec with unknown initial state %q", m.Initial.Name)
			}
			reach := Reachable(m)
			for _, st := range m.States {
				if !reach[st.Name] {
					t.Fatalf("valid spec with unreachable state %q", st.Name)
				}
				for _, tr := range st.Transitions {
					if tr.To.Set() && m.State(tr.To.Name) == nil {
						t.Fatalf("valid spec with transition to unknown state %q", tr.To.Name)
					}
				}
			}
		}
	})
}

// TestTooManyStates: the generated state type is a uint8.
func TestTooManyStates(t *testing.T) {
	var b strings.Builder
	b.WriteString("machine \"big\" {\n  initial = state.s0\n  event \"next\" {}\n")
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "  state \"s%d\" {\n    transition \"next\" { to = state.s%d }\n  }\n", i, i+1)
	}
	b.WriteString("  state \"s300\" { final = true }\n}\n")
	_, diags := Parse([]File{{Name: "big.hcl", Src: []byte(b.String())}})
	if len(diags) != 1 || !strings.Contains(Line(diags[0]), `big.hcl:1:9: error: Too many states: machine "big" declares 301 states`) {
		t.Fatalf("diags = %v", diags)
	}
}

// TestDocsListEveryValidationRule: docs/spec.md shows, for each invalid
// spec of the corpus, the diagnostic it produces.
func TestDocsListEveryValidationRule(t *testing.T) {
	doc, err := os.ReadFile("../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("testdata/invalid/*.diag")
	if len(files) == 0 {
		t.Fatal("no invalid corpus")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(strings.TrimSpace(string(raw)), "\n")
		name := strings.TrimSuffix(filepath.Base(f), ".diag")
		if !strings.Contains(string(doc), "| `"+name+"` | `"+strings.ReplaceAll(first, "|", `\|`)+"` |") {
			t.Errorf("docs/spec.md lacks the row of %s: %s", name, first)
		}
	}
}

// TestUncancellable: the embedded spec declares exactly the calls a kill
// must let finish (the creates and the start, which containerd may complete
// after a cancelled request), each with its reason; and the construct
// decodes in source order, a key bare or quoted.
func TestUncancellable(t *testing.T) {
	s, diags := Parse(Embedded())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var got []string
	for _, m := range s.Machines {
		for _, a := range m.Actions {
			for _, u := range a.Uncancellable {
				got = append(got, m.Name+"/"+a.Name+"/"+u.Method)
				if len(u.Why) < 40 {
					t.Errorf("%s/%s: reason for %s too short to say why: %q", m.Name, a.Name, u.Method, u.Why)
				}
			}
		}
	}
	want := []string{"container/create_container/CreateContainer", "container/start_container/StartContainer", "sandbox/run_sandbox/RunPodSandbox"}
	if !slices.Equal(got, want) {
		t.Errorf("uncancellable calls %v, want %v", got, want)
	}

	src := `machine "m" {
  initial = state.a
  event "go" {}
  action "act" {
    cri           = ["CreateContainer", "StartContainer", "ExecSync"]
    uncancellable = {
      StartContainer    = "start"
      "CreateContainer" = "create"
    }
  }
  state "a" {
    transition "go" {
      to      = state.b
      actions = [action.act]
    }
  }
  state "b" { final = true }
}
`
	ps, diags := Parse([]File{{Name: "m.hcl", Src: []byte(src)}})
	for _, d := range diags {
		t.Errorf("%s", Line(d))
	}
	us := ps.Machine("m").Actions[0].Uncancellable
	if len(us) != 2 || us[0].Method != "StartContainer" || us[0].Why != "start" || us[1].Method != "CreateContainer" || us[1].Why != "create" ||
		us[0].Range.Start.Line != 7 || us[1].ValueRange.Start.Line != 8 {
		t.Errorf("decoded %+v %+v", us[0], us[1])
	}
}

// TestCallers: the embedded spec declares the kubelet API's and log
// rotation's handlers, and a caller block decodes with its file.
func TestCallers(t *testing.T) {
	s, diags := Parse(Embedded())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got := map[string][]string{}
	for _, c := range s.Callers {
		if c.File != "spec/callers.hcl" {
			t.Errorf("caller %s in %s", c.Name, c.File)
		}
		for _, h := range c.Handlers {
			got[c.Name] = append(got[c.Name], h.Name)
		}
	}
	want := map[string][]string{
		"kubelet_api":  {"container_logs", "exec", "attach", "port_forward", "run", "running_pods", "stats_summary", "metrics_resource", "metrics_cadvisor"},
		"log_rotation": {"rotate_once"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("handlers %v, want %v", got, want)
	}
	if s.CallersFile() != "spec/callers.hcl" {
		t.Errorf("CallersFile() = %q", s.CallersFile())
	}
	// A second file with a caller is refused, naming both files.
	files := append(Embedded(), File{Name: "spec/zz.hcl", Src: []byte("caller \"other\" {\n  handler \"h\" { cri = [\"Version\"] }\n}\n")})
	_, diags = Parse(files)
	if !diags.HasErrors() || !strings.Contains(Line(diags[0]), `spec/zz.hcl:1:8: error: Callers in two files: caller "other" is declared in spec/zz.hcl, but the first caller is in spec/callers.hcl`) {
		t.Errorf("two caller files: %v", diags)
	}
}

// TestCallerErrors: the misuses of caller and handler that the corpus does
// not show, each a positioned diagnostic.
func TestCallerErrors(t *testing.T) {
	const machine = "machine \"m\" {\n  initial = state.a\n  event \"go\" {}\n  state \"a\" {\n    transition \"go\" { to = state.b }\n  }\n  state \"b\" { final = true }\n}\n"
	for _, tc := range []struct{ name, src, want string }{
		{"clashing handler names", `caller "a_b" {
  handler "c" { cri = ["Version"] }
}
caller "a" {
  handler "b_c" { cri = ["Version"] }
}
`, `c.hcl:13:11: error: Clashing handler names: handler "b_c" of caller "a" becomes the Go name HandlerABC, like handler "c" of caller "a_b"; rename one.`},
		{"handler without cri", `caller "api" {
  handler "idle" {}
}
`, `c.hcl:10:11: warning: Handler without CRI calls: handler "idle" of caller "api" lists no cri`},
		{"bad handler name", `caller "api" {
  handler "Exec" { cri = ["Exec"] }
}
`, `c.hcl:10:11: error: Invalid name: handler name "Exec" must match`},
		{"uncancellable in a handler", `caller "api" {
  handler "exec" {
    cri           = ["Exec"]
    uncancellable = { Exec = "no" }
  }
}
`, `c.hcl:12:5: error: Unsupported argument: An argument named "uncancellable" is not expected here.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := Parse([]File{{Name: "c.hcl", Src: []byte(machine + tc.src)}})
			var lines []string
			for _, d := range diags {
				lines = append(lines, Line(d))
			}
			if !strings.Contains(strings.Join(lines, "\n"), tc.want) {
				t.Errorf("diagnostics:\n%s\nwant one starting %s", strings.Join(lines, "\n"), tc.want)
			}
		})
	}
}
