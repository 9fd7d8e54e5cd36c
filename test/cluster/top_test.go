package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/test/cluster"
)

// testKubectlTop: metrics-server v0.8.0, built from its Go module, runs
// against the cluster as its release manifests deploy it (its own
// identity, the v1beta1.metrics.k8s.io APIService behind a Service whose
// endpoint is the host end of a veth pair made here), scrapes both speclet
// nodes' /metrics/resource, and the real `kubectl top nodes` and
// `kubectl top pods -A` show every node and a running pod with nonzero CPU
// and memory.
func testKubectlTop(t *testing.T, e *env) {
	ci := os.Getenv("CI") == "true"
	if _, err := exec.LookPath("ip"); err != nil {
		if ci {
			t.Fatal("ip (iproute2) missing; make deps installs it")
		}
		t.Skip("ip (iproute2) missing; make deps installs it")
	}
	if !cluster.MetricsServerCached() && !ci {
		t.Skipf("metrics-server %s not built; run `make metrics-server-binary` or set CI=true", cluster.MetricsServerVersion)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin, err := cluster.MetricsServerBinary(ctx, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := cluster.NewHostAddr("ms")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := addr.Remove(); err != nil {
			t.Error(err)
		}
	})
	ms, err := e.c.StartMetricsServer(ctx, cluster.MetricsServerOptions{Bin: bin, Addr: addr.IP, Resolution: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// Registered after addr's: runs before it (the server's address goes
	// last).
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("metrics-server log:\n%s", cluster.TailFile(ms.LogPath, 40))
		}
		if err := ms.Stop(); err != nil {
			t.Error(err)
		}
	})

	// A pod that uses some CPU all the time and holds 8 MB: its usage
	// rounds to neither 0m nor 0Mi.
	load := e.pod("top-load", "node-b", v1.RestartPolicyAlways,
		`x=$(head -c 8000000 /dev/zero | tr '\0' x); while :; do i=0; while [ $i -lt 5000 ]; do i=$((i+1)); done; sleep 1; done`)
	e.create(t, load)
	t.Cleanup(func() {
		if err := e.admin.CoreV1().Pods("default").Delete(context.Background(), "top-load", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}); err != nil {
			t.Errorf("delete pod top-load: %v", err)
			return
		}
		e.waitGone(t, "top-load", 60*time.Second)
	})
	e.waitPod(t, "top-load", 90*time.Second, "Running", running)

	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(e.c.BinDir, "kubectl"), append([]string{"--kubeconfig", e.c.AdminKubeconfig()}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return stdout.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return stdout.String(), nil
	}
	// metrics-server reports a node or pod after two scrapes of it
	// (15 s apart): a minute and a half bounds it with room for a slow
	// machine.
	var nodesOut, podsOut string
	var missing []string
	deadline := time.Now().Add(90 * time.Second)
	for {
		missing = nil
		out, err := kubectl("top", "nodes", "--no-headers")
		nodesOut = out
		if err != nil {
			missing = append(missing, err.Error())
		} else {
			rows := rowsByName(out, 0)
			for _, n := range []string{"node-a", "node-b"} {
				if r, ok := rows[n]; !ok || len(r) < 4 || !positive(r[1]) || !positive(r[3]) {
					missing = append(missing, fmt.Sprintf("node %s with nonzero CPU and memory (row %q)", n, r))
				}
			}
		}
		out, err = kubectl("top", "pods", "-A", "--no-headers")
		podsOut = out
		if err != nil {
			missing = append(missing, err.Error())
		} else {
			r, ok := rowsByName(out, 0, 1)["default/top-load"]
			if !ok || len(r) < 4 || !positive(r[2]) || !positive(r[3]) {
				missing = append(missing, fmt.Sprintf("pod default/top-load with nonzero CPU and memory (row %q)", r))
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if len(missing) > 0 {
		t.Fatalf("kubectl top within 90s: missing %s\nkubectl top nodes:\n%s\nkubectl top pods -A:\n%s", strings.Join(missing, "; "), nodesOut, podsOut)
	}
	t.Logf("kubectl top nodes:\n%skubectl top pods -A:\n%s", nodesOut, podsOut)
}

// rowsByName splits kubectl's table output into rows keyed by the
// columns at keys, joined with "/".
func rowsByName(out string, keys ...int) map[string][]string {
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) <= keys[len(keys)-1] {
			continue
		}
		var k []string
		for _, i := range keys {
			k = append(k, f[i])
		}
		rows[strings.Join(k, "/")] = f
	}
	return rows
}

// positive reports whether s is a quantity above zero ("12m", "8Mi"; not
// "0m", "<unknown>").
func positive(s string) bool {
	q, err := resource.ParseQuantity(s)
	return err == nil && q.Sign() > 0
}

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
