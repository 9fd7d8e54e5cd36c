package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func runSpecCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runSpec(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestSpecCheckRepositorySpec(t *testing.T) {
	files, _ := filepath.Glob("../../spec/*.hcl")
	if len(files) < 3 {
		t.Fatalf("found %d spec files", len(files))
	}
	code, out, errs := runSpecCmd(t, append([]string{"check"}, files...)...)
	if code != 0 || !strings.HasPrefix(out, fmt.Sprintf("spec ok: %d file(s), ", len(files))) || errs != "" {
		t.Fatalf("check spec/*.hcl: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	// Without files it checks the spec built into the binary.
	if code, out, _ := runSpecCmd(t, "check"); code != 0 || !strings.HasPrefix(out, "spec ok:") {
		t.Fatalf("check (built-in): exit %d, %s", code, out)
	}
}

// TestSpecCheckInvalidCorpus: every invalid file exits 1 naming file:line:col
// and showing the offending source line.
func TestSpecCheckInvalidCorpus(t *testing.T) {
	files, _ := filepath.Glob("../../spec/testdata/invalid/*.hcl")
	if len(files) == 0 {
		t.Fatal("no invalid corpus")
	}
	for _, f := range files {
		code, out, errs := runSpecCmd(t, "check", f)
		pos := regexp.MustCompile(regexp.QuoteMeta(f) + `:\d+:\d+: error: `)
		if code != 1 || !pos.MatchString(errs) || out != "" {
			t.Errorf("check %s: exit %d, want 1 with %s:LINE:COL in the message\nstderr: %s", f, code, f, errs)
		}
		if !strings.Contains(errs, "on "+f+" line ") {
			t.Errorf("check %s: no source snippet in\n%s", f, errs)
		}
	}
}

func TestSpecCheckNamesPositions(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"syntax_error.hcl", "syntax_error.hcl:16:37: error: Invalid single-argument block definition"},
		{"unknown_state.hcl", `unknown_state.hcl:16:30: error: Unknown state: state "a" transition "back" refers to state "bb", which is not declared. Did you mean "b"?`},
	} {
		code, _, errs := runSpecCmd(t, "check", "../../spec/testdata/invalid/"+tc.file)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("check %s: exit %d, want 1 and %q in\n%s", tc.file, code, tc.want, errs)
		}
	}
	if code, _, errs := runSpecCmd(t, "check", "no/such.hcl"); code != 1 || !strings.Contains(errs, "no/such.hcl") {
		t.Errorf("check of a missing file: exit %d, %s", code, errs)
	}
}

func TestSpecGraph(t *testing.T) {
	code, out, errs := runSpecCmd(t, "graph", "--machine", "pod", "--format", "dot")
	if code != 0 || errs != "" {
		t.Fatalf("graph pod dot: exit %d: %s", code, errs)
	}
	for _, want := range []string{`digraph "pod" {`, `"syncing"`, `"terminating"`, `"terminated"`, `"[*]" -> "pending";`, `"terminating" -> "terminated" [label="termination_done [all_containers_stopped]"];`} {
		if !strings.Contains(out, want) {
			t.Errorf("pod DOT lacks %s", want)
		}
	}
	code, out, _ = runSpecCmd(t, "graph", "--machine", "container", "--format", "mermaid")
	if code != 0 || !strings.Contains(out, "stateDiagram-v2") || !strings.Contains(out, "running --> stopping : liveness_failed") {
		t.Errorf("graph container mermaid: exit %d\n%s", code, out)
	}
	code, out, errs = runSpecCmd(t, "graph", "--spec", "../../spec/testdata/valid", "--machine", "door")
	if code != 0 || !strings.Contains(out, `digraph "door"`) {
		t.Errorf("graph --spec testdata/valid door: exit %d %s", code, errs)
	}
}

func TestSpecGraphErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"graph", "--machine", "kubelet"}, 1, `no machine "kubelet" in the spec (machines: container, device_plugin, node, pod, probe, sandbox)`},
		{[]string{"graph", "--machine", "pod", "--format", "png"}, 2, `unknown --format "png"`},
		{[]string{"graph"}, 2, "--machine is required (one of: container, device_plugin, node, pod, probe, sandbox)"},
		{[]string{"graph", "--spec", "../../spec/testdata/invalid", "--machine", "m"}, 1, "the spec has"},
		{[]string{"draw"}, 2, `unknown subcommand "draw"`},
		{nil, 2, "usage:"},
	} {
		code, _, errs := runSpecCmd(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("spec %v: exit %d, want %d and %q in\n%s", tc.args, code, tc.code, tc.want, errs)
		}
	}
}

// TestSpecGraphSVG: the SVG is drawn without Graphviz, the same drawing
// the daemon's /spec/graph serves.
func TestSpecGraphSVG(t *testing.T) {
	t.Setenv("PATH", "")
	code, out, errs := runSpecCmd(t, "graph", "--machine", "pod", "--format", "svg")
	if code != 0 || !strings.Contains(out, "<svg") || !strings.Contains(out, `id="state-terminating"`) {
		t.Fatalf("graph svg: exit %d: %s", code, errs)
	}
}

// TestSpecVerify: the built-in spec and the repository's files pass; a spec
// broken on purpose fails with a trace; bad usage and bad specs exit 2.
func TestSpecVerify(t *testing.T) {
	code, out, errs := runSpecCmd(t, "verify", "-k", "2")
	if code != 0 || !strings.Contains(out, "K=1: ") || !strings.Contains(out, "K=2: ") || !strings.Contains(out, "verify ok: ") || errs != "" {
		t.Fatalf("verify -k 2: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if !regexp.MustCompile(`K=2: \d+ role assignment\(s\), [1-9]\d* states`).MatchString(out) {
		t.Errorf("no state count in\n%s", out)
	}
	// The status keeps a terminal phase: the report says where that rule is
	// needed.
	if !strings.Contains(out, "invariant phase_never_backwards (phase_rank): holds") ||
		!strings.Contains(out, "the status keeps a terminal phase (phase keeps_terminal)") ||
		!strings.Contains(out, "terminated --started--> stopping") {
		t.Errorf("no trace where the status keeps a terminal phase in\n%s", out)
	}
	files, _ := filepath.Glob("../../spec/*.hcl")
	if code, out, errs := runSpecCmd(t, append([]string{"verify", "-k", "1"}, files...)...); code != 0 {
		t.Fatalf("verify spec/*.hcl: exit %d\n%s%s", code, out, errs)
	}

	dir := t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "pod.hcl" {
			old := `transition "update" { doc = "Updates during termination only matter for the grace period." }`
			if !bytes.Contains(b, []byte(old)) {
				t.Fatalf("pod.hcl has no %s", old)
			}
			b = bytes.Replace(b, []byte(old), []byte(`transition "update" { to = state.syncing }`), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mutated, _ := filepath.Glob(filepath.Join(dir, "*.hcl"))
	code, out, _ = runSpecCmd(t, append([]string{"verify", "-k", "1"}, mutated...)...)
	if code != 1 || !strings.Contains(out, "invariant worker_never_backwards (rank): VIOLATED") ||
		!strings.Contains(out, "pod terminating --update--> syncing / sync_pod") || !strings.Contains(out, "verify FAILED") {
		t.Fatalf("verify of a spec whose pod goes back to syncing: exit %d\n%s", code, out)
	}

	if code, _, _ := runSpecCmd(t, "verify", "-k", "5"); code != 2 {
		t.Errorf("verify -k 5: exit %d, want 2", code)
	}
	if code, _, _ := runSpecCmd(t, "verify", "-k", "0"); code != 2 {
		t.Errorf("verify -k 0: exit %d, want 2", code)
	}
	if code, _, _ := runSpecCmd(t, "verify", "--bogus"); code != 2 {
		t.Errorf("verify --bogus: exit %d, want 2", code)
	}
	if code, _, errs := runSpecCmd(t, "verify", "../../spec/testdata/invalid/unknown_state.hcl"); code != 2 || !strings.Contains(errs, "unknown_state.hcl:") {
		t.Errorf("verify of an invalid spec: exit %d, want 2\n%s", code, errs)
	}
	if code, _, _ := runSpecCmd(t, "verify", filepath.Join(dir, "missing.hcl")); code != 2 {
		t.Errorf("verify of a missing file: exit %d, want 2", code)
	}
}

// TestSpecCommandsBoundNesting: check, verify and graph --spec refuse a spec
// file nested past spec.MaxNestingDepth with the position where the limit is
// passed, before the HCL parser (which overflows its stack on a deep
// enough file) sees it.
func TestSpecCommandsBoundNesting(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "deep.hcl")
	n := 150
	src := "machine \"m\" {\n  initial = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n}\n"
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	want := f + ":2:112: error: Spec file nested too deeply"
	for _, args := range [][]string{{"check", f}, {"verify", f}, {"graph", "--spec", dir, "--machine", "m"}} {
		code, _, errs := runSpecCmd(t, args...)
		if code == 0 || !strings.Contains(errs, want) {
			t.Errorf("spec %s: exit %d, stderr:\n%s\nwant %q", strings.Join(args, " "), code, errs, want)
		}
	}
}
