package conformance

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/speclet/speclet/cri/harness"
)

var (
	kubeletBin  = flag.String("conformance.kubelet", "", "kubelet binary: run the whole corpus on kubelet and speclet (make conformance)")
	record      = flag.Bool("conformance.record", false, "with -conformance.kubelet: write kubelet's results to testdata/kubelet")
	pool        = flag.Int("conformance.pool", 3, "scenarios run at a time (each on every agent)")
	only        = flag.String("conformance.run", "", "regexp: run only the scenarios whose name matches")
	specletOnly = flag.Bool("conformance.speclet-only", false, "run the selected scenarios on speclet alone and print the states seen")
	results     = flag.String("conformance.results", "", "directory of results written by -conformance.out: compare them again without running anything")
	outDir      = flag.String("conformance.out", "", "directory to write every result (JSON) and the report to")
)

const (
	scenarioDir = "testdata/scenarios"
	recordedDir = "testdata/kubelet"
)

func TestScenariosParse(t *testing.T) {
	ss, err := LoadScenarios(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) < 40 {
		t.Errorf("%d scenarios, want at least 40", len(ss))
	}
	fast := 0
	for _, s := range ss {
		if s.Fast {
			fast++
			if _, err := os.Stat(filepath.Join(recordedDir, s.Name+".json")); err != nil {
				t.Errorf("fast scenario %s has no recorded kubelet result: %v", s.Name, err)
			}
		}
		if s.Comment == "" {
			t.Errorf("scenario %s says nothing about what it checks (# comment)", s.Name)
		}
	}
	if fast == 0 || fast > 10 {
		t.Errorf("%d fast scenarios, want 1..10", fast)
	}
}

func TestKeyEquivalences(t *testing.T) {
	states := []Seen{
		{State: Absent, Count: 2},
		{State: "Pending creating", Count: 1}, // one sample: timing
		{State: "Running", Count: 3},
		{State: "Running err", Count: 2},
		{State: "Running", Count: 5},   // seen before: a cycle
		{State: "Succeeded", Count: 1}, // final, kept
	}
	got := strings.Join(Key(states), ",")
	if want := "Running,Running err,Succeeded"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
}

// TestSidecarsStopping: the window in which a pod's regular containers
// completed and its sidecar still stops (phase Running) is timing; a pod
// that is Succeeded while its sidecar runs is not (equivalence 11).
func TestSidecarsStopping(t *testing.T) {
	const pre = "ip=host | Ready=False(ContainersNotReady) | "
	for _, tc := range []struct {
		state string
		want  bool
	}{
		{"Running " + pre + "init:side running r0 ready started | main terminated(Completed,0) r0", true},
		{"Running " + pre + "init:side running r0 ready started | main running r0 ready started", false},
		{"Running " + pre + "init:side running r0 ready started | a terminated(Completed,0) r0 | b running r0", false},
		{"Succeeded " + pre + "init:side running r0 ready started | main terminated(Completed,0) r0", false},
		{"Running " + pre + "init:setup terminated(Completed,0) r0 | main terminated(Completed,0) r0", false},
	} {
		if got := sidecarsStopping(tc.state); got != tc.want {
			t.Errorf("sidecarsStopping(%q) = %v, want %v", tc.state, got, tc.want)
		}
	}
}

// TestCompareStartError: kubelet shows PostStartHookError until its next
// sync after each failed attempt (recorded: 1 to 14 s), then
// CrashLoopBackOff. An agent that shows the error for the attempt and
// CrashLoopBackOff through the backoff matches (equivalence 9); one that
// keeps PostStartHookError through the whole backoff differs.
func TestCompareStartError(t *testing.T) {
	kube, err := readResult(filepath.Join(recordedDir, "poststart-exec-fail.json"))
	if err != nil {
		t.Fatal(err)
	}
	const run = "Running ip=host | ContainersReady=False(ContainersNotReady) Initialized=True PodReadyToStartContainers=True PodScheduled=True Ready=False(ContainersNotReady) | main "
	result := func(states ...Seen) *Result {
		r := &Result{Scenario: kube.Scenario, Agent: "speclet", States: states}
		r.Final = states[len(states)-1].State
		return r
	}
	creating := Seen{State: kube.States[0].State, Count: 2}
	ok := result(creating,
		// The first failed attempt shown long: the immediate restart's
		// create and hook were slow (a loaded machine).
		Seen{State: run + "waiting(PostStartHookError) r0 last=Completed/0", Count: 16},
		Seen{State: run + "waiting(PostStartHookError) r1 last=Completed/0", Count: 1},
		Seen{State: run + "waiting(CrashLoopBackOff) r1 last=Completed/0", Count: 10},
		Seen{State: run + "waiting(PostStartHookError) r2+ last=Completed/0", Count: 1},
		Seen{State: run + "waiting(CrashLoopBackOff) r2+ last=Completed/0", Count: 20})
	if v := Compare(kube, ok); !v.Match {
		t.Errorf("the start error for one sample, CrashLoopBackOff in the backoff: differs:\n%s", strings.Join(v.Reasons, "\n"))
	}
	kept := result(creating,
		Seen{State: run + "waiting(PostStartHookError) r1 last=Completed/0", Count: 11},
		Seen{State: run + "waiting(PostStartHookError) r2+ last=Completed/0", Count: 21})
	if v := Compare(kube, kept); v.Match {
		t.Errorf("PostStartHookError kept through the backoff matches kubelet's CrashLoopBackOff")
	}
}

// TestCompareEndOfCycle: a run that ends on the first sample of a dead
// instance of a looping container that died before ended a cycle ahead of
// the other agent (equivalence 4); one that ends on its first death, or
// holds the dead instance longer than a sample, differs.
func TestCompareEndOfCycle(t *testing.T) {
	kube, err := readResult(filepath.Join(recordedDir, "onfailure-exit-late.json"))
	if err != nil {
		t.Fatal(err)
	}
	const (
		up   = "Running ip=host | ContainersReady=True Initialized=True PodReadyToStartContainers=True PodScheduled=True Ready=True | main "
		down = "Running ip=host | ContainersReady=False(ContainersNotReady) Initialized=True PodReadyToStartContainers=True PodScheduled=True Ready=False(ContainersNotReady) | main "
	)
	result := func(states ...Seen) *Result {
		r := &Result{Scenario: kube.Scenario, Agent: "speclet", States: states}
		r.Final = states[len(states)-1].State
		return r
	}
	loop := []Seen{
		{State: kube.States[0].State, Count: 2},
		{State: up + "running r0 ready started", Count: 8},
		{State: down + "terminated(Error,3) r0", Count: 1},
		{State: up + "running r1 last=Error/3 ready started", Count: 8},
		{State: down + "waiting(CrashLoopBackOff) r1 last=Error/3", Count: 10},
		{State: up + "running r2+ last=Error/3 ready started", Count: 8},
	}
	for _, tc := range []struct {
		name  string
		run   *Result
		match bool
	}{
		{"ends on the next death, one sample", result(append(loop[:6:6], Seen{State: down + "terminated(Error,3) r2+ last=Error/3", Count: 1})...), true},
		{"ends running, like kubelet", result(loop...), true},
		{"ends on the next backoff, one sample", result(append(loop[:6:6], Seen{State: down + "waiting(CrashLoopBackOff) r2+ last=Error/3", Count: 1})...), true},
		{"ends on the next death, two samples", result(append(loop[:6:6], Seen{State: down + "terminated(Error,3) r2+ last=Error/3", Count: 2})...), false},
		{"never backed off", result(loop[0], loop[1], Seen{State: down + "terminated(Error,3) r0", Count: 1}), false},
	} {
		if v := Compare(kube, tc.run); v.Match != tc.match {
			t.Errorf("%s: match = %v, want %v:\n%s", tc.name, v.Match, tc.match, strings.Join(v.Reasons, "\n"))
		}
	}
	// kubelet a cycle ahead: it showed terminated through its backoff,
	// never CrashLoopBackOff, and the container is in a loop because the
	// other run backed off.
	ahead := *kube
	ahead.States = append(kube.States[:len(kube.States):len(kube.States)], Seen{State: down + "terminated(Error,3) r2+ last=Error/3", Count: 1})
	ahead.Final = ahead.States[len(ahead.States)-1].State
	if v := Compare(&ahead, result(loop...)); !v.Match {
		t.Errorf("kubelet ends on the next death, one sample: differs:\n%s", strings.Join(v.Reasons, "\n"))
	}
	// Both in that backoff at the end, kubelet for a sample: the same point
	// of the cycle.
	backoff := Seen{State: down + "waiting(CrashLoopBackOff) r2+ last=Error/3", Count: 5}
	if v := Compare(&ahead, result(append(loop[:6:6], backoff)...)); !v.Match {
		t.Errorf("both end in the next backoff: differs:\n%s", strings.Join(v.Reasons, "\n"))
	}
}

// setup starts what both agents share: the registry and the hook server.
func setup(t testing.TB) (*harness.Registry, Env) {
	t.Helper()
	if os.Geteuid() != 0 {
		msg := "conformance runs containerd and the agents and needs root"
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %s", msg)
		}
		t.Skip(msg)
	}
	ctx := context.Background()
	if err := harness.EnsurePackages(ctx, os.Stderr); err != nil {
		t.Fatal(err)
	}
	reg, err := harness.StartRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	if err := reg.PushDefaults(ctx); err != nil {
		t.Fatal(err)
	}
	hooks, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "failing on purpose", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})}
	go srv.Serve(hooks)
	t.Cleanup(func() { srv.Close() })
	dead, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	return reg, Env{TempDir: tmp, Vars: map[string]string{
		"IMAGE":    reg.Ref(harness.BusyboxRepo),
		"PAUSE":    reg.Ref(harness.PauseRepo),
		"MISSING":  reg.Ref("busybox:nosuchtag"),
		"HOOKPORT": fmt.Sprint(hooks.Addr().(*net.TCPAddr).Port),
		"DEADPORT": fmt.Sprint(dead),
	}}
}

func buildSpeclet(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "speclet")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/speclet/speclet/cmd/speclet").CombinedOutput()
	if err != nil {
		t.Fatalf("go build speclet: %v\n%s", err, out)
	}
	return bin
}

func startAgent(t *testing.T, kind AgentKind, bin string, reg *harness.Registry) *Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, err := StartAgent(ctx, kind, bin, reg, nil)
	if err != nil {
		t.Fatalf("start %s: %v", kind, err)
	}
	t.Cleanup(func() {
		if err := a.Stop(); err != nil {
			t.Error(err)
		}
	})
	return a
}

func selectScenarios(t *testing.T, fastOnly bool) []*Scenario {
	t.Helper()
	all, err := LoadScenarios(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	var re *regexp.Regexp
	if *only != "" {
		re = regexp.MustCompile(*only)
	}
	var out []*Scenario
	for _, s := range all {
		if (fastOnly && !s.Fast) || (re != nil && !re.MatchString(s.Name)) {
			continue
		}
		out = append(out, s)
	}
	return out
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func readResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	return &r, json.Unmarshal(b, &r)
}

// report prints the verdicts and the removal times, and returns the text.
func report(t *testing.T, scenarios []*Scenario, kube, spec map[string]*Result) (string, int) {
	var b strings.Builder
	matched := 0
	var vs []Verdict
	for _, s := range scenarios {
		k, sp := kube[s.Name], spec[s.Name]
		if k == nil || sp == nil {
			vs = append(vs, Verdict{Scenario: s.Name, Reasons: []string{"no result"}})
			continue
		}
		v := Compare(k, sp)
		if v.Match {
			matched++
		}
		vs = append(vs, v)
	}
	fmt.Fprintf(&b, "conformance: %d of %d scenarios match\n", matched, len(scenarios))
	for _, v := range vs {
		word := "match"
		if !v.Match {
			word = "DIFFERS"
		}
		rt := ""
		if v.RuntimeDiffers {
			rt = fmt.Sprintf(" (runtime at the end: kubelet %s; speclet %s)", kube[v.Scenario].Runtime, spec[v.Scenario].Runtime)
		}
		fmt.Fprintf(&b, "  %-40s %s%s\n", v.Scenario, word, rt)
		for _, r := range v.Reasons {
			fmt.Fprintf(&b, "      %s\n", r)
		}
	}
	for _, set := range []struct {
		name string
		rs   map[string]*Result
	}{{"kubelet", kube}, {"speclet", spec}} {
		var sum, max float64
		var all []float64
		for _, s := range scenarios {
			if r := set.rs[s.Name]; r != nil && r.RuntimeEmpty >= 0 {
				sum += r.RuntimeEmpty
				all = append(all, r.RuntimeEmpty)
				if r.RuntimeEmpty > max {
					max = r.RuntimeEmpty
				}
			}
		}
		sort.Float64s(all)
		p50 := 0.0
		if len(all) > 0 {
			p50 = all[len(all)/2]
		}
		fmt.Fprintf(&b, "removal (manifest removed -> runtime empty), %s: %d pods, sum %.1fs, p50 %.1fs, max %.1fs\n", set.name, len(all), sum, p50, max)
	}
	return b.String(), matched
}

// TestConformance runs the whole corpus on kubelet and speclet, each on its
// own containerd, and compares (make conformance). With
// -conformance.record it also writes kubelet's results to testdata/kubelet.
func TestConformance(t *testing.T) {
	if *kubeletBin == "" {
		t.Skip("no -conformance.kubelet: run `make conformance`")
	}
	reg, env := setup(t)
	scenarios := selectScenarios(t, false)
	speclet := buildSpeclet(t)
	ka := startAgent(t, Kubelet, *kubeletBin, reg)
	sa := startAgent(t, Speclet, speclet, reg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	t0 := time.Now()
	if *outDir != "" {
		os.MkdirAll(*outDir, 0o755)
	}
	res := RunAll(ctx, []*Agent{ka, sa}, scenarios, env, *pool, func(r *Result) {
		fmt.Fprintf(os.Stderr, "conformance: %s on %s done at %s: %s\n", r.Scenario, r.Agent, time.Since(t0).Round(time.Second), r.Final)
		if *outDir != "" {
			writeJSON(filepath.Join(*outDir, r.Agent+"-"+r.Scenario+".json"), r)
		}
	})
	kube, spec := res[Kubelet], res[Speclet]
	text, matched := report(t, scenarios, kube, spec)
	fmt.Print(text)
	if *outDir != "" {
		os.WriteFile(filepath.Join(*outDir, "report.txt"), []byte(text), 0o644)
	}
	if *record {
		for name, r := range kube {
			if r.Error != "" {
				t.Errorf("not recording %s: kubelet run failed: %s", name, r.Error)
				continue
			}
			r.Version = filepath.Base(filepath.Dir(*kubeletBin))
			if err := writeJSON(filepath.Join(recordedDir, name+".json"), r); err != nil {
				t.Error(err)
			}
		}
	}
	for _, r := range kube {
		if r.Error != "" {
			t.Errorf("kubelet %s: %s", r.Scenario, r.Error)
		}
	}
	for _, r := range spec {
		if r.Error != "" {
			t.Errorf("speclet %s: %s", r.Scenario, r.Error)
		}
	}
	_ = matched // differences are reported, documented in docs/conformance.md, not failures
}

// TestConformanceRecorded runs the fast scenarios on speclet only and
// compares with kubelet's recorded results (testdata/kubelet), so that
// `go test ./...` needs no kubelet binary.
func TestConformanceRecorded(t *testing.T) {
	if *kubeletBin != "" {
		t.Skip("TestConformance runs the whole corpus")
	}
	scenarios := selectScenarios(t, true)
	if len(scenarios) == 0 {
		t.Skip("no fast scenario selected")
	}
	reg, env := setup(t)
	kube := map[string]*Result{}
	for _, s := range scenarios {
		r, err := readResult(filepath.Join(recordedDir, s.Name+".json"))
		if err != nil {
			t.Fatalf("recorded kubelet result of %s: %v", s.Name, err)
		}
		kube[s.Name] = r
	}
	sa := startAgent(t, Speclet, buildSpeclet(t), reg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	spec := RunAll(ctx, []*Agent{sa}, scenarios, env, len(scenarios), nil)[Speclet]
	text, _ := report(t, scenarios, kube, spec)
	t.Log("\n" + text)
	for _, s := range scenarios {
		if v := Compare(kube[s.Name], spec[s.Name]); !v.Match {
			t.Errorf("%s: speclet differs from kubelet's recorded result:\n  %s\nspeclet log tail:\n%s", s.Name, strings.Join(v.Reasons, "\n  "), sa.LogTail(20))
		}
	}
}

// TestSpecletOnly runs the selected scenarios on speclet alone and prints
// every state seen: for writing a scenario or looking at one difference
// without a kubelet.
func TestSpecletOnly(t *testing.T) {
	if !*specletOnly {
		t.Skip("no -conformance.speclet-only")
	}
	reg, env := setup(t)
	scenarios := selectScenarios(t, false)
	sa := startAgent(t, Speclet, buildSpeclet(t), reg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	res := RunAll(ctx, []*Agent{sa}, scenarios, env, *pool, nil)[Speclet]
	for _, s := range scenarios {
		r := res[s.Name]
		fmt.Printf("%s: error=%q removal: pods %.1fs runtime %.1fs; runtime at end: %s\n", s.Name, r.Error, r.GoneFromPods, r.RuntimeEmpty, r.Runtime)
		for _, st := range r.States {
			fmt.Printf("  %5.1fs x%-2d %s\n", st.At, st.Count, st.State)
		}
		if *outDir != "" {
			os.MkdirAll(*outDir, 0o755)
			writeJSON(filepath.Join(*outDir, "speclet-"+s.Name+".json"), r)
		}
	}
}

// TestReport compares results written earlier (-conformance.out) again, to
// look at a change of the equivalences without running the agents.
func TestReport(t *testing.T) {
	if *results == "" {
		t.Skip("no -conformance.results")
	}
	scenarios := selectScenarios(t, false)
	kube, spec := map[string]*Result{}, map[string]*Result{}
	for _, s := range scenarios {
		if r, err := readResult(filepath.Join(*results, "kubelet-"+s.Name+".json")); err == nil {
			kube[s.Name] = r
		}
		if r, err := readResult(filepath.Join(*results, "speclet-"+s.Name+".json")); err == nil {
			spec[s.Name] = r
		}
	}
	text, _ := report(t, scenarios, kube, spec)
	fmt.Print(text)
}
