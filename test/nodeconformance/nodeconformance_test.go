package nodeconformance

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/cluster"
)

// fastBudget is how long the fast subset may take, setup included.
const fastBudget = 5 * time.Minute

// TestFastSubset runs the specs of testdata/fast.txt (each one kubelet
// passes, as testdata/kubelet.txt records) on a speclet node and fails for
// every one speclet does not pass. It needs root, etcd-server, the control
// plane and the suite's binaries; outside CI it skips when they are not
// built (`make node-conformance-binaries kube-binaries`), with CI=true it
// builds them.
func TestFastSubset(t *testing.T) {
	ci := os.Getenv("CI") == "true"
	skip := func(format string, a ...any) {
		t.Helper()
		if ci {
			t.Fatalf("CI=true: "+format, a...)
		}
		t.Skipf(format, a...)
	}
	if os.Geteuid() != 0 {
		skip("node conformance runs containerd and needs root")
	}
	if _, err := os.Stat(cluster.EtcdPath); err != nil {
		skip("%s missing (Debian package etcd-server; make deps installs it)", cluster.EtcdPath)
	}
	if !ci && (!BinariesCached(DefaultVersion) || !cluster.BinariesCached(DefaultVersion)) {
		skip("e2e.test or the control plane is not built: run `make node-conformance-binaries kube-binaries` (minutes when cold) or set CI=true")
	}
	fast, err := ReadNames("testdata/fast.txt")
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := ReadVerdicts("testdata/kubelet.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(fast) < 25 {
		t.Fatalf("testdata/fast.txt: %d specs, want at least 25", len(fast))
	}
	for _, name := range fast {
		if kubelet[name] != Pass {
			t.Fatalf("testdata/fast.txt: %q: kubelet's recorded verdict is %q, not PASS (testdata/kubelet.txt); the fast subset holds only specs kubelet passes", name, kubelet[name])
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	log := testLog{t}
	bins, err := BuildBinaries(ctx, DefaultVersion, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Binaries(ctx, DefaultVersion, log); err != nil {
		t.Fatal(err)
	}
	bin, err := cluster.BuildSpeclet(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now() // the budget counts from here: building is not the subset's
	reg, err := harness.StartRegistry("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if err := PushImages(ctx, reg, bins); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(fast))
	for i, n := range fast {
		quoted[i] = ExactName(n)
	}
	out := t.TempDir()
	r, err := Run(ctx, Options{
		Agent: Speclet, Bins: bins, Registry: reg, SpecletBin: bin,
		Nodes: 1, Procs: 5, Focus: strings.Join(quoted, "|"),
		Out: out, Timeout: fastBudget, Log: log,
	})
	if err != nil {
		if r == nil {
			t.Fatal(err)
		}
		t.Error(err)
	}
	got := map[string]Spec{}
	for _, s := range r.Specs {
		got[s.Name] = s
	}
	failed := 0
	for _, name := range fast {
		s, ok := got[name]
		switch {
		case !ok:
			failed++
			t.Errorf("%s: did not run (renamed in the suite? update testdata/fast.txt)", name)
		case s.Verdict != Pass:
			failed++
			t.Errorf("%s: speclet %s, kubelet PASS:\n%s\n%s", name, s.Verdict, s.Location, s.Message)
		}
	}
	if failed > 0 {
		logs, _ := filepath.Glob(filepath.Join(out, "logs", "*", "speclet.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Logf("%s (last lines):\n%s", l, strings.Join(lines, "\n"))
		}
	}
	elapsed := time.Since(start)
	t.Logf("node conformance, fast subset: speclet %d of %d in %s", len(fast)-failed, len(fast), elapsed.Round(time.Second))
	if elapsed > fastBudget {
		t.Errorf("the fast subset took %s, more than its budget of %s: take slow specs out of testdata/fast.txt", elapsed.Round(time.Second), fastBudget)
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
