package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/speclet/speclet/test/cluster"
	"github.com/speclet/speclet/test/kubebuild"
)

// nodeAudit logs every request of a node identity (group system:nodes)
// once, when answered.
const nodeAudit = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  userGroups: ["system:nodes"]
- level: None
`

// hollowPodsPerNode is the Deployment's pods per node; hollowMaxPods each
// node's pods capacity (room for the scheduler's uneven spread).
const (
	hollowPodsPerNode = 10
	hollowMaxPods     = 30
)

// BenchmarkHollow measures simulated nodes at scale against a real control
// plane (kube-apiserver with the Node authorizer and NodeRestriction and an
// audit log of every node request, kube-scheduler, kube-controller-manager
// with --kube-api-qps 500 so that their client limits are not what is
// measured): `speclet hollow` with N nodes (SPECLET_HOLLOW_NODES, default
// "100,500", one process per N), then kubemark's hollow kubelet of
// k8s.io/kubernetes v1.34.4 (cmd/kubemark, one process per node, as
// kubemark runs it) with SPECLET_KUBEMARK_NODES nodes (default 100; 0
// skips it). For each: every node has been Ready (at least once: on a
// loaded machine some flap while others start), a Deployment of 10 pods per node
// (busybox `sleep 3600`, grace 1 s) is created, until the API shows every
// pod Running and Ready; then deleted, until the API has none.
//
// Metrics per agent and N (speclet-N-*, kubemark-N-*): running-s (create to
// all Running), gone-s (delete to all gone), rss-MiB/node (the processes'
// RSS per node, the peak of samples every 2 s), requests/pod (API requests
// by the nodes from the create until all were gone, per pod) and
// pod-requests/pod (the same without Node and Lease requests).
// -benchtime=1x is enough.
func BenchmarkHollow(b *testing.B) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			b.Fatal("CI=true: the hollow benchmark runs kubemark, which needs root")
		}
		b.Skip("the hollow benchmark runs kubemark, which needs root")
	}
	sizes, err := envInts("SPECLET_HOLLOW_NODES", "100,500")
	if err != nil {
		b.Fatal(err)
	}
	km, err := envInts("SPECLET_KUBEMARK_NODES", "100")
	if err != nil || len(km) != 1 {
		b.Fatalf("SPECLET_KUBEMARK_NODES: want one number (%v)", err)
	}
	ctx := context.Background()
	var kubemark string
	if km[0] > 0 {
		dir, err := kubebuild.Build(ctx, kubebuild.Options{Set: "kubemark", Version: cluster.DefaultVersion, Commands: []string{"kubemark"}, Log: os.Stderr})
		if err != nil {
			b.Fatal(err)
		}
		kubemark = filepath.Join(dir, "kubemark")
	}
	maxN := 0
	for _, n := range sizes {
		maxN = max(maxN, n)
	}
	c := cluster.ForTest(b, cluster.Options{Scheduler: true, ControllerManager: true, HollowNodes: maxN, ControlPlaneQPS: 500, AuditPolicy: nodeAudit})
	admin, err := burstClient(c.AdminKubeconfig())
	if err != nil {
		b.Fatal(err)
	}
	bin, err := cluster.BuildSpeclet(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	var table []string
	for _, n := range sizes {
		h, err := c.StartHollow(ctx, cluster.HollowOptions{Bin: bin, Nodes: n, PodsPerNodeMax: hollowMaxPods, Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		names := make([]string, n)
		for i := range names {
			names[i] = cluster.HollowName(i)
		}
		r, err := scaleRound(ctx, c, admin, "speclet", names, func() []int { return []int{h.Pid()} })
		if err != nil {
			b.Logf("speclet hollow log:\n%s", h.LogTail(60))
		}
		h.Stop()
		if err != nil {
			b.Fatal(err)
		}
		table = append(table, r.report(b))
		if err := forgetNodes(ctx, admin, names); err != nil {
			b.Fatal(err)
		}
	}
	if kubemark != "" {
		k, err := startKubemark(ctx, c, kubemark, km[0], b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		r, err := scaleRound(ctx, c, admin, "kubemark", k.names, k.pids)
		k.stop()
		if err != nil {
			b.Fatal(err)
		}
		table = append(table, r.report(b))
		forgetNodes(ctx, admin, k.names)
	}
	b.Logf("\n| agent | nodes | pods | all Running | all gone | RSS per node | requests per pod | without Node/Lease |\n|---|---|---|---|---|---|---|---|\n%s", strings.Join(table, "\n"))
}

func envInts(name, def string) ([]int, error) {
	s := os.Getenv(name)
	if s == "" {
		s = def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s: %q: want numbers, comma-separated", name, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// scaleResult is one round of BenchmarkHollow.
type scaleResult struct {
	agent                string
	nodes, pods          int
	running, gone        time.Duration
	rssPeak              uint64
	requests, podRequest int
}

func (r scaleResult) report(b *testing.B) string {
	p := fmt.Sprintf("%s-%d-", r.agent, r.nodes)
	perNode := float64(r.rssPeak) / float64(r.nodes) / (1 << 20)
	b.ReportMetric(r.running.Seconds(), p+"running-s")
	b.ReportMetric(r.gone.Seconds(), p+"gone-s")
	b.ReportMetric(perNode, p+"rss-MiB/node")
	b.ReportMetric(float64(r.requests)/float64(r.pods), p+"requests/pod")
	b.ReportMetric(float64(r.podRequest)/float64(r.pods), p+"pod-requests/pod")
	return fmt.Sprintf("| %s | %d | %d | %.1f s | %.1f s | %.1f MiB | %.2f | %.2f |", r.agent, r.nodes, r.pods,
		r.running.Seconds(), r.gone.Seconds(), perNode, float64(r.requests)/float64(r.pods), float64(r.podRequest)/float64(r.pods))
}

// scaleRound waits for nodes to be Ready, runs the Deployment up and down
// and measures it; pids are the agent's processes (RSS).
func scaleRound(ctx context.Context, c *cluster.Cluster, admin *kubernetes.Clientset, agent string, nodes []string, pids func() []int) (scaleResult, error) {
	r := scaleResult{agent: agent, nodes: len(nodes), pods: hollowPodsPerNode * len(nodes)}
	if err := waitNodesReadyOnce(ctx, admin, nodes, 20*time.Minute, true); err != nil {
		return r, err
	}
	stopRSS := sampleRSS(pids, &r.rssPeak)
	defer stopRSS()
	name := fmt.Sprintf("scale-%s-%d", agent, len(nodes))
	off, err := fileSize(c.AuditLog())
	if err != nil {
		return r, err
	}
	start := time.Now()
	d := hollowDeployment(name, "busybox:latest", int32(r.pods), nil)
	if _, err := admin.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	if _, err := waitPods(ctx, admin, name, 30*time.Minute, time.Second, func(_, running int) bool { return running == r.pods }); err != nil {
		return r, err
	}
	r.running = time.Since(start)
	start = time.Now()
	if err := admin.AppsV1().Deployments("default").Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptrTo(metav1.DeletePropagationBackground)}); err != nil {
		return r, err
	}
	if _, err := waitPods(ctx, admin, name, 30*time.Minute, time.Second, func(total, _ int) bool { return total == 0 }); err != nil {
		return r, err
	}
	r.gone = time.Since(start)
	stopRSS()
	r.requests, r.podRequest, err = nodeRequests(c.AuditLog(), off, "system:node:"+strings.TrimRight(nodes[0], "0123456789"))
	return r, err
}

// sampleRSS samples the summed RSS of pids every 2 s into *peak until the
// returned stop is called (idempotent).
func sampleRSS(pids func() []int, peak *uint64) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	sample := func() {
		var sum uint64
		for _, p := range pids() {
			if v, err := cluster.RSS(p); err == nil {
				sum += v
			}
		}
		*peak = max(*peak, sum)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			sample()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// nodeRequests counts the audit events from byte offset on of users whose
// name starts with prefix: all of them, and those not about Nodes or
// Leases.
func nodeRequests(audit string, offset int64, prefix string) (all, pods int, err error) {
	f, err := os.Open(audit)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			User      struct{ Username string } `json:"user"`
			ObjectRef struct{ Resource string } `json:"objectRef"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || !strings.HasPrefix(ev.User.Username, prefix) {
			continue
		}
		all++
		if ev.ObjectRef.Resource != "nodes" && ev.ObjectRef.Resource != "leases" {
			pods++
		}
	}
	return all, pods, sc.Err()
}

// forgetNodes deletes the Node objects (and Leases) of stopped nodes, so
// that the next round's pods are scheduled only onto its own nodes.
func forgetNodes(ctx context.Context, admin *kubernetes.Clientset, names []string) error {
	return parallel(len(names), func(i int) error {
		admin.CoordinationV1().Leases("kube-node-lease").Delete(ctx, names[i], metav1.DeleteOptions{})
		return admin.CoreV1().Nodes().Delete(ctx, names[i], metav1.DeleteOptions{})
	})
}

// kubemarkNodes are running kubemark hollow kubelets, one process each.
type kubemarkNodes struct {
	names []string
	cmds  []*exec.Cmd
}

func (k *kubemarkNodes) pids() []int {
	out := make([]int, 0, len(k.cmds))
	for _, c := range k.cmds {
		out = append(out, c.Process.Pid)
	}
	return out
}

func (k *kubemarkNodes) stop() {
	for _, c := range k.cmds {
		c.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range k.cmds {
		c.Wait()
	}
}

// startKubemark runs n kubemark hollow kubelets kubemark-<i>, each with its
// own node client certificate (CN=system:node:kubemark-<i>), its fake
// runtime and image service, and its own kubelet port on this machine.
func startKubemark(ctx context.Context, c *cluster.Cluster, bin string, n int, dir string) (*kubemarkNodes, error) {
	k := &kubemarkNodes{}
	for i := 0; i < n; i++ {
		name := "kubemark-" + strconv.Itoa(i)
		kc, err := c.NodeKubeconfig(name)
		if err != nil {
			k.stop()
			return nil, err
		}
		port, err := freeTCPPort()
		if err != nil {
			k.stop()
			return nil, err
		}
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			k.stop()
			return nil, err
		}
		cmd := exec.CommandContext(ctx, bin, "--morph=kubelet", "--name="+name, "--kubeconfig="+kc,
			"--kubelet-port="+strconv.Itoa(port), "--kubelet-read-only-port=0", "--max-pods="+strconv.Itoa(hollowMaxPods),
			"--use-host-image-service=false", "--v=0")
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			k.stop()
			return nil, fmt.Errorf("start kubemark %s: %w", name, err)
		}
		logf.Close()
		k.names = append(k.names, name)
		k.cmds = append(k.cmds, cmd)
	}
	return k, nil
}
