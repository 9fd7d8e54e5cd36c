package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/test/cluster"
)

// TestAPIBadInput runs speclet nodes (on the simulated runtime) against a
// real kube-apiserver given bad input: a kubeconfig whose server nothing
// listens on and one whose token the API server refuses each give one
// clear error line per failing activity (registration, the pod source,
// the informers) naming the cause, however long the node retries; an
// API server that stops in the middle of a burst of pods and comes back
// loses no status: every pod's status in the API then matches the node's.
func TestAPIBadInput(t *testing.T) {
	ctx := context.Background()
	c := cluster.ForTest(t, cluster.Options{})
	admin, err := burstClient(c.AdminKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	bin, err := cluster.BuildSpeclet(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	crt, _ := c.CA()
	kubeconfig := func(server, token string) string {
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		body := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: %q, certificate-authority: %q}\nusers:\n- name: u\n  user: {token: %q}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n", server, crt, token)
		if err := os.WriteFile(kc, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return kc
	}
	// oneClearError waits for the node's error naming want, then for 20 s
	// of retries (registration backs off 1, 2, 4, 8 s: five attempts), and
	// checks each failing activity logged its cause once.
	oneClearError := func(t *testing.T, name, kc, want string) {
		n, err := c.StartNode(ctx, cluster.NodeOptions{Name: name, Bin: bin, Dir: t.TempDir(), Kubeconfig: kc})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Stop()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(n.LogTail(1000), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no error saying %q within 30s; log:\n%s", want, n.LogTail(40))
			}
			time.Sleep(200 * time.Millisecond)
		}
		time.Sleep(20 * time.Second)
		log := n.LogTail(1000)
		// One line per activity that fails (registration, the pod source,
		// the informers), each naming the cause; none repeated.
		seen := map[string]int{}
		var errs []string
		for _, l := range strings.Split(log, "\n") {
			isErr := strings.Contains(l, "level=ERROR")
			klogErr := len(l) > 5 && l[0] == 'E' && l[1] >= '0' && l[1] <= '9' && strings.Contains(l, "]")
			if !isErr && !klogErr {
				continue
			}
			errs = append(errs, l)
			key := l
			if i := strings.Index(l, "msg="); i >= 0 {
				key = l[i:]
				if j := strings.Index(key, " err="); j >= 0 {
					key = key[:j]
				}
			}
			seen[key]++
		}
		for k, c := range seen {
			if c > 1 {
				t.Errorf("logged %d times in 20 s of retries, want once: %s", c, k)
			}
		}
		if len(errs) > 5 {
			t.Errorf("%d error lines in 20 s of retries, want one per failing activity:\n%s", len(errs), strings.Join(errs, "\n"))
		}
		if t.Failed() {
			t.Logf("log:\n%s", log)
		}
	}

	t.Run("UnreachableAPIServer", func(t *testing.T) {
		port, err := freeTCPPort()
		if err != nil {
			t.Fatal(err)
		}
		oneClearError(t, "node-unreachable", kubeconfig(fmt.Sprintf("https://127.0.0.1:%d", port), "x"), "the API server is unreachable")
	})

	t.Run("RefusedToken", func(t *testing.T) {
		oneClearError(t, "node-badtoken", kubeconfig(c.URL, "not-a-valid-token"), "the API server refused the node's credentials (401 Unauthorized")
	})

	t.Run("APIServerRestartMidBurst", func(t *testing.T) {
		n, err := c.StartNode(ctx, cluster.NodeOptions{Name: "node-restart", Bin: bin, Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if t.Failed() {
				t.Logf("log of node-restart:\n%s", n.LogTail(60))
			}
			n.Stop()
		}()
		if err := waitNodeReady(ctx, admin, "node-restart", time.Minute); err != nil {
			t.Fatal(err)
		}
		const total = 40
		pods := admin.CoreV1().Pods("default")
		if err := parallel(total, func(i int) error {
			_, err := pods.Create(ctx, &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mid-%d", i), Namespace: "default", Labels: map[string]string{"burst": "mid"}},
				Spec: v1.PodSpec{NodeName: "node-restart", AutomountServiceAccountToken: ptr.To(false), TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []v1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "3600"}}}},
			}, metav1.CreateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// Stop the API server while the node is still starting them.
		c.StopAPIServer()
		time.Sleep(5 * time.Second)
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := c.StartAPIServer(rctx); err != nil {
			t.Fatal(err)
		}
		var diff []string
		deadline := time.Now().Add(60 * time.Second)
		for {
			diff = statusDiff(t, admin, n, total)
			if len(diff) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("60 s after the API server came back, %d pods' API status differs from the node's:\n%s", len(diff), strings.Join(diff, "\n"))
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
}

// statusDiff compares, for each of the total pods of the burst, the
// node's status (its read-only /pods) with the API's: phase, Ready, and
// each container's state, ID and restart count. It lists the differences.
func statusDiff(t *testing.T, admin *kubernetes.Clientset, n *cluster.Node, total int) []string {
	t.Helper()
	node := nodeStatuses(t, n)
	l, err := admin.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "burst=mid"})
	if err != nil {
		return []string{fmt.Sprintf("list pods: %v", err)}
	}
	var diff []string
	if len(l.Items) != total {
		diff = append(diff, fmt.Sprintf("%d pods in the API, want %d", len(l.Items), total))
	}
	for _, p := range l.Items {
		ns, ok := node[p.Name]
		if !ok {
			diff = append(diff, p.Name+": not on the node")
			continue
		}
		if a, b := summary(p.Status), summary(ns); a != b {
			diff = append(diff, fmt.Sprintf("%s: API %s, node %s", p.Name, a, b))
		}
	}
	return diff
}

// summary is what statusDiff compares of a status.
func summary(s v1.PodStatus) string {
	ready := v1.ConditionUnknown
	for _, c := range s.Conditions {
		if c.Type == v1.PodReady {
			ready = c.Status
		}
	}
	out := fmt.Sprintf("phase=%s ready=%s", s.Phase, ready)
	for _, c := range s.ContainerStatuses {
		state := "waiting"
		switch {
		case c.State.Running != nil:
			state = "running"
		case c.State.Terminated != nil:
			state = "terminated"
		}
		out += fmt.Sprintf(" %s=%s/%s/%d", c.Name, state, c.ContainerID, c.RestartCount)
	}
	return out
}

// nodeStatuses is the node's pods by name (its read-only /pods).
func nodeStatuses(t *testing.T, n *cluster.Node) map[string]v1.PodStatus {
	t.Helper()
	out := map[string]v1.PodStatus{}
	for _, p := range nodePodList(t, n).Items {
		out[p.Name] = p.Status
	}
	return out
}
