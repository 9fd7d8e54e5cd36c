package nodee2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/cluster"
	nc "github.com/speclet/speclet/test/nodeconformance"
)

// fastBudget bounds the fast subset's run (its Timeout), setup included.
const fastBudget = 5 * time.Minute

// TestFastSubset runs the specs of testdata/fast.txt (each one kubelet
// passes, as testdata/kubelet.txt records, or one testdata/beyond-kubelet.txt
// lists: kubelet fails it on this kind of host, for the reason given there,
// and speclet passes it) on a speclet node, as
// `make node-e2e` does, and fails for every one whose verdict is not the
// expected one: PASS, or FAIL for the specs testdata/speclet-fails.txt
// lists (interfaces speclet does not serve yet; a spec there that passes
// fails the test too, so that the list is kept true). It needs root,
// etcd-server, the control plane and the suite's binaries; outside CI it
// skips when they are not built (`make node-conformance-binaries
// kube-binaries`), with CI=true it builds them.
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
		skip("node e2e runs containerd and needs root")
	}
	if _, err := os.Stat(cluster.EtcdPath); err != nil {
		skip("%s missing (Debian package etcd-server; make deps installs it)", cluster.EtcdPath)
	}
	if !ci && (!nc.BinariesCached(nc.DefaultVersion) || !cluster.BinariesCached(nc.DefaultVersion)) {
		skip("e2e_node.test or the control plane is not built: run `make node-conformance-binaries kube-binaries` (minutes when cold) or set CI=true")
	}
	fast, err := nc.ReadNames("testdata/fast.txt")
	if err != nil {
		t.Fatal(err)
	}
	fails, err := nc.ReadNames("testdata/speclet-fails.txt")
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := nc.ReadVerdicts("testdata/kubelet.txt")
	if err != nil {
		t.Fatal(err)
	}
	beyond, err := nc.ReadNames("testdata/beyond-kubelet.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range beyond {
		if kubelet[name] == nc.Pass {
			t.Fatalf("testdata/beyond-kubelet.txt: %q: kubelet's recorded verdict is PASS (testdata/kubelet.txt): take it out of that list", name)
		}
		if !slices.Contains(fast, name) {
			t.Fatalf("testdata/beyond-kubelet.txt: %q is not in testdata/fast.txt", name)
		}
	}
	hostFails := hostBound()
	want := map[string]nc.Verdict{}
	for _, name := range fast {
		if _, ok := hostFails[name]; kubelet[name] != nc.Pass && !slices.Contains(beyond, name) && !ok {
			t.Fatalf("testdata/fast.txt: %q: kubelet's recorded verdict is %q, not PASS (testdata/kubelet.txt); the fast subset holds only specs kubelet passes, and those testdata/beyond-kubelet.txt lists", name, kubelet[name])
		}
		if IsSerial(name) {
			t.Fatalf("testdata/fast.txt: %q is a [Serial] spec; the fast subset runs specs in parallel", name)
		}
		want[name] = nc.Pass
	}
	for _, name := range fails {
		if _, ok := want[name]; !ok {
			t.Fatalf("testdata/speclet-fails.txt: %q is not in testdata/fast.txt", name)
		}
		want[name] = nc.Fail
	}
	for name, hf := range hostFails {
		if _, ok := want[name]; !ok {
			t.Fatalf("hostBound: %q is not in testdata/fast.txt", name)
		}
		if hf.fails {
			t.Logf("%s: expected to fail on this host (%s)", name, hf.why)
			want[name] = nc.Fail
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	log := testLog{t}
	bins, err := nc.BuildBinaries(ctx, nc.DefaultVersion, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Binaries(ctx, nc.DefaultVersion, log); err != nil {
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
	if err := nc.PushNodeE2EImages(ctx, reg, bins); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(fast))
	for i, n := range fast {
		quoted[i] = nc.ExactName(n)
	}
	out := t.TempDir()
	r, err := Run(ctx, Options{
		Agent: Speclet, Bins: bins, Registry: reg, SpecletBin: bin,
		Procs: 4, Focus: strings.Join(quoted, "|"),
		Out: out, Timeout: fastBudget, Log: log,
	})
	if err != nil {
		if r == nil {
			t.Fatal(err)
		}
		t.Error(err)
	}
	got := map[string]nc.Spec{}
	for _, s := range r.Specs {
		got[s.Name] = s
	}
	bad := 0
	for _, name := range fast {
		s, ok := got[name]
		switch {
		case !ok:
			bad++
			t.Errorf("%s: did not run (renamed in the suite? update testdata/fast.txt)", name)
		case hostFails[name].fails && s.Verdict == nc.Fail:
			if err := hostFails[name].check(s.Message); err != nil {
				bad++
				t.Errorf("%s: fails on this host (%s), but %v:\n%s", name, hostFails[name].why, err, s.Message)
			}
		case hostFails[name].fails:
			bad++
			t.Errorf("%s: speclet %s on a host where it cannot pass (%s): check hostBound", name, s.Verdict, hostFails[name].why)
		case s.Verdict != want[name] && want[name] == nc.Fail:
			bad++
			t.Errorf("%s: speclet %s, listed in testdata/speclet-fails.txt: take it out of that list", name, s.Verdict)
		case s.Verdict != want[name]:
			bad++
			t.Errorf("%s: speclet %s, kubelet %s:\n%s\n%s", name, s.Verdict, kubelet[name], s.Location, s.Message)
		}
	}
	if bad > 0 {
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
	expectFail := 0
	for _, v := range want {
		if v == nc.Fail {
			expectFail++
		}
	}
	t.Logf("node e2e, fast subset: speclet %d of %d as expected (%d expected to fail) in %s", len(fast)-bad, len(fast), expectFail, elapsed.Round(time.Second))
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// hostFail is a spec whose verdict this host decides: where fails, no
// agent passes it here, for why, and the spec's failure may name nothing
// but series that allow matches (check).
type hostFail struct {
	fails bool
	why   string
	allow *regexp.Regexp
}

// check says whether a failure message is the host's: it names series,
// and only series allow matches.
func (h hostFail) check(msg string) error {
	var other []string
	named := false
	for _, m := range seriesName.FindAllString(msg, -1) {
		if strings.HasSuffix(m, ".go") {
			continue // a file of the suite (container_metrics_test.go), no series
		}
		named = true
		if !h.allow.MatchString(m) && !slices.Contains(other, m) {
			other = append(other, m)
		}
	}
	switch {
	case !named:
		return fmt.Errorf("the failure names no series")
	case len(other) > 0:
		return fmt.Errorf("it fails for %v too", other)
	}
	return nil
}

var seriesName = regexp.MustCompile(`\bcontainer_[a-z0-9_]+(\.go)?`)

// hostBound are the specs of testdata/fast.txt that need what not every
// host gives. ContainerMetrics wants, for each container, per-device
// block I/O series (container_fs_reads_bytes_total, container_blkio_...);
// a cgroup v1 host whose blkio hierarchy accounts nothing (kernels that
// account v1 block I/O only under a throttling rule, as here: the root's
// blkio.throttle.io_service_bytes_recursive reads "Total 0") has none for
// any agent, cAdvisor's included. There the spec runs and must fail for
// the block I/O and file system families alone: every other series it
// checks (CPU, memory, processes, spec, network) is asserted.
func hostBound() map[string]hostFail {
	b, err := os.ReadFile("/sys/fs/cgroup/blkio/blkio.throttle.io_service_bytes_recursive")
	noBlockIO := err == nil && !regexp.MustCompile(`(?m)^\d+:\d+ \w+ [1-9]`).Match(b)
	return map[string]hostFail{
		"[sig-node] ContainerMetrics [LinuxOnly] [NodeConformance] when querying /metrics/cadvisor should report container metrics": {
			fails: noBlockIO, why: "the host's cgroups account no block I/O",
			allow: regexp.MustCompile(`^container_(fs|blkio)_`),
		},
	}
}
