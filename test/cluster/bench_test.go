package cluster_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/cluster"
	"github.com/speclet/speclet/test/kubebuild"
)

// kubeletVersion is the upstream kubelet the API burst compares with.
const kubeletVersion = "v1.34.4"

// statusAudit logs every write (create, update, patch, delete) a node makes
// (user group system:nodes: pod status, pod deletions, events, the Node,
// its Lease, mirror pods) once each, when answered.
const statusAudit = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
  userGroups: ["system:nodes"]
- level: None
`

// BenchmarkAPIBurst measures pods bound to a node through the API server,
// on speclet and on kubelet v1.34 in the same run: one control plane
// (kube-apiserver with the Node authorizer and NodeRestriction, an audit
// log of pod status writes), node bench-speclet (the speclet binary) and
// node bench-kubelet (kubelet, registered with its own node credentials),
// each on its own harness containerd, one registry. For N = 30 and 100,
// on each node in turn: N host-network busybox pods (`sleep 3600`, grace
// period 1 s, no service account token) are created with spec.nodeName at
// once, until the API shows all N Running and ready; then deleted, until
// the API has none and the node's runtime runs nothing of them.
//
// Before them, in each size, the same N pods as static pods of
// bench-speclet (manifests written at once, until its /pods shows all
// Running and ready): speclet-static-start-all-s, the floor of the API
// path in the same run.
//
// Metrics, per agent (speclet-*, kubelet-*): start-all-s (first create to
// all Running in the API), start-p50-s and start-p99-s (per pod, from the
// first create), remove-api-s (first delete to all gone from the API),
// remove-runtime-s (to gone from the API and no container running, no
// sandbox ready), status-writes/start (pod status PUTs and PATCHes by the
// node during the start phase, per pod), status-writes/delete (during
// removal, per pod), api-writes/start and api-writes/delete (every write
// request of the node in those phases, per pod: pod status, deletions,
// events, Node status, Lease; from the API server's audit log).
// -benchtime=1x is enough.
func BenchmarkAPIBurst(b *testing.B) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			b.Fatal("CI=true: the API burst runs containerd and needs root")
		}
		b.Skip("the API burst runs containerd and needs root")
	}
	ctx := context.Background()
	// SPECLET_BENCH_AGENTS=speclet runs speclet's node alone (no kubelet
	// build or node; its metrics are then absent).
	withKubelet := os.Getenv("SPECLET_BENCH_AGENTS") != "speclet"
	var kubeletDir string
	if withKubelet {
		var err error
		if kubeletDir, err = kubebuild.Build(ctx, kubebuild.Options{Set: "kubelet", Version: kubeletVersion, Commands: []string{"kubelet"}, Log: os.Stderr}); err != nil {
			b.Fatal(err)
		}
	}
	agents := []string{"bench-speclet", "bench-kubelet"}
	order := []string{"bench-speclet", "bench-kubelet", "bench-kubelet", "bench-speclet"}
	if !withKubelet {
		agents, order = []string{"bench-speclet"}, []string{"bench-speclet", "bench-speclet"}
	}
	c := cluster.ForTest(b, cluster.Options{AuditPolicy: statusAudit})
	admin, err := burstClient(c.AdminKubeconfig())
	if err != nil {
		b.Fatal(err)
	}
	reg, err := harness.StartRegistry("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { reg.Close() })
	if err := reg.PushDefaults(ctx); err != nil {
		b.Fatal(err)
	}
	image := reg.Ref(harness.BusyboxRepo)
	runtimes := map[string]cri.Runtime{}
	newContainerd := func(name string) *harness.Containerd {
		cd, err := harness.StartContainerd(ctx, harness.Options{Registry: reg, Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if err := cd.Stop(); err != nil {
				b.Errorf("stop containerd: %v", err)
			}
		})
		rt, err := cri.Dial(ctx, cd.Endpoint, cri.WithTimeout(30*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { rt.Close() })
		runtimes[name] = rt
		return cd
	}

	bin, err := cluster.BuildSpeclet(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	sn, err := c.StartNode(ctx, cluster.NodeOptions{Name: "bench-speclet", Bin: bin, Containerd: newContainerd("bench-speclet"), Dir: b.TempDir(),
		Args: []string{"-v", "0"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if b.Failed() {
			b.Logf("log of bench-speclet:\n%s", sn.LogTail(40))
		}
		sn.Stop()
	})
	if withKubelet {
		kl, err := c.StartKubelet(cluster.KubeletOptions{Name: "bench-kubelet", Bin: filepath.Join(kubeletDir, "kubelet"), Containerd: newContainerd("bench-kubelet"), Dir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			if b.Failed() {
				b.Logf("log of bench-kubelet:\n%s", kl.LogTail(40))
			}
			kl.Stop()
		})
	}
	for _, node := range agents {
		if err := waitNodeReady(ctx, admin, node, 3*time.Minute); err != nil {
			b.Fatal(err)
		}
	}

	round := 0
	for _, n := range []int{30, 100} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			sum := map[string]*burstResult{}
			var static time.Duration
			for i := 0; i < b.N; i++ {
				// The same pods as static pods of bench-speclet: the floor
				// the API path is compared with, in the same run.
				round++
				d, err := staticBurst(ctx, sn, runtimes["bench-speclet"], image, n, round)
				if err != nil {
					b.Fatalf("static burst: %v", err)
				}
				b.Logf("bench-speclet N=%d static pods: start-all %.2fs", n, d.Seconds())
				static += d
				// speclet, kubelet, kubelet, speclet: neither always meets
				// a machine warmed (or burdened) by the other.
				for _, node := range order {
					round++
					r, err := apiBurst(ctx, admin, runtimes[node], c.AuditLog(), node, image, n, round)
					if err != nil {
						b.Fatalf("%s: %v", node, err)
					}
					b.Logf("%s N=%d: start-all %.2fs p50 %.2fs p99 %.2fs, remove-api %.2fs remove-runtime %.2fs, status writes %d start + %d delete, API writes %d start + %d delete",
						node, n, r.startAll.Seconds(), r.p50, r.p99, r.removeAPI.Seconds(), r.removeRuntime.Seconds(), r.startWrites, r.deleteWrites, r.startAPIWrites, r.deleteAPIWrites)
					if sum[node] == nil {
						sum[node] = &burstResult{}
					}
					sum[node].add(r)
				}
			}
			b.ReportMetric(static.Seconds()/float64(b.N), "speclet-static-start-all-s")
			for _, node := range agents {
				s, k := sum[node], float64(2*b.N)
				name := map[string]string{"bench-speclet": "speclet", "bench-kubelet": "kubelet"}[node]
				b.ReportMetric(s.startAll.Seconds()/k, name+"-start-all-s")
				b.ReportMetric(s.p50/k, name+"-start-p50-s")
				b.ReportMetric(s.p99/k, name+"-start-p99-s")
				b.ReportMetric(s.removeAPI.Seconds()/k, name+"-remove-api-s")
				b.ReportMetric(s.removeRuntime.Seconds()/k, name+"-remove-runtime-s")
				b.ReportMetric(float64(s.startWrites)/k/float64(n), name+"-status-writes/start")
				b.ReportMetric(float64(s.deleteWrites)/k/float64(n), name+"-status-writes/delete")
				b.ReportMetric(float64(s.startAPIWrites)/k/float64(n), name+"-api-writes/start")
				b.ReportMetric(float64(s.deleteAPIWrites)/k/float64(n), name+"-api-writes/delete")
			}
		})
	}
}

type burstResult struct {
	startAll, removeAPI, removeRuntime time.Duration
	p50, p99                           float64
	startWrites, deleteWrites          int
	startAPIWrites, deleteAPIWrites    int
}

func (s *burstResult) add(r burstResult) {
	s.startAll += r.startAll
	s.removeAPI += r.removeAPI
	s.removeRuntime += r.removeRuntime
	s.p50 += r.p50
	s.p99 += r.p99
	s.startWrites += r.startWrites
	s.deleteWrites += r.deleteWrites
	s.startAPIWrites += r.startAPIWrites
	s.deleteAPIWrites += r.deleteAPIWrites
}

// apiBurst runs one burst of n pods on node.
func apiBurst(ctx context.Context, admin *kubernetes.Clientset, rt cri.Runtime, audit, node, image string, n, round int) (burstResult, error) {
	var r burstResult
	label := fmt.Sprintf("burst-%d", round)
	pods := admin.CoreV1().Pods("default")
	writes0, all0, err := statusWrites(audit, node, label+"-")
	if err != nil {
		return r, err
	}
	start := time.Now()
	if err := parallel(n, func(i int) error {
		_, err := pods.Create(ctx, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", label, i), Namespace: "default", Labels: map[string]string{"burst": label}},
			Spec: v1.PodSpec{
				NodeName: node, HostNetwork: true, RestartPolicy: v1.RestartPolicyAlways,
				AutomountServiceAccountToken: ptr.To(false), TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []v1.Container{{Name: "main", Image: image, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "3600"}}},
			},
		}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return r, fmt.Errorf("create: %w", err)
	}
	runningAt := map[string]time.Duration{}
	deadline := start.Add(10 * time.Minute)
	for len(runningAt) < n {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("%d of %d pods Running after 10m", len(runningAt), n)
		}
		l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "burst=" + label})
		if err == nil {
			for i := range l.Items {
				if _, seen := runningAt[l.Items[i].Name]; !seen && running(&l.Items[i]) {
					runningAt[l.Items[i].Name] = time.Since(start)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.startAll = time.Since(start)
	per := make([]float64, 0, n)
	for _, d := range runningAt {
		per = append(per, d.Seconds())
	}
	sort.Float64s(per)
	r.p50, r.p99 = per[len(per)/2], per[min(len(per)-1, int(float64(len(per))*0.99))]
	// Let the status writes of the start settle before counting them.
	time.Sleep(3 * time.Second)
	writes1, all1, err := statusWrites(audit, node, label+"-")
	if err != nil {
		return r, err
	}
	r.startWrites, r.startAPIWrites = writes1-writes0, all1-all0

	del := time.Now()
	if err := parallel(n, func(i int) error {
		return pods.Delete(ctx, fmt.Sprintf("%s-%d", label, i), metav1.DeleteOptions{})
	}); err != nil {
		return r, fmt.Errorf("delete: %w", err)
	}
	apiGone, runtimeIdle := false, false
	deadline = del.Add(5 * time.Minute)
	for !(apiGone && runtimeIdle) {
		if time.Now().After(deadline) {
			return r, fmt.Errorf("after 5m: gone from the API %v, nothing running %v", apiGone, runtimeIdle)
		}
		if !apiGone {
			if l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "burst=" + label}); err == nil && len(l.Items) == 0 {
				apiGone, r.removeAPI = true, time.Since(del)
			}
		}
		if !runtimeIdle {
			idle, err := nothingRuns(ctx, rt)
			if err != nil {
				return r, err
			}
			runtimeIdle = idle
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.removeRuntime = time.Since(del)
	// Let the writes of the removal settle before counting them.
	time.Sleep(3 * time.Second)
	writes2, all2, err := statusWrites(audit, node, label+"-")
	if err != nil {
		return r, err
	}
	r.deleteWrites, r.deleteAPIWrites = writes2-writes1, all2-all1
	return r, nil
}

// staticBurst writes n manifests of the API burst's pod into node's
// manifest directory at once and returns the time until its read-only
// /pods shows all n Running and ready; then it removes them and waits
// until the runtime runs nothing.
func staticBurst(ctx context.Context, node *cluster.Node, rt cri.Runtime, image string, n, round int) (time.Duration, error) {
	label := fmt.Sprintf("static-%d", round)
	start := time.Now()
	for i := 0; i < n; i++ {
		m := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s-%d, namespace: default}\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n  containers:\n  - {name: main, image: %q, imagePullPolicy: IfNotPresent, command: [sleep, \"3600\"]}\n", label, i, image)
		if err := os.WriteFile(filepath.Join(node.Manifests, fmt.Sprintf("%s-%d.yaml", label, i)), []byte(m), 0o644); err != nil {
			return 0, err
		}
	}
	var took time.Duration
	for deadline := start.Add(10 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d static pods not all Running after 10m", n)
		}
		resp, err := http.Get(node.Base + "/pods")
		if err != nil {
			continue
		}
		var l v1.PodList
		err = json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		if err != nil {
			continue
		}
		k := 0
		for i := range l.Items {
			if strings.HasPrefix(l.Items[i].Name, label+"-") && running(&l.Items[i]) {
				k++
			}
		}
		if k == n {
			took = time.Since(start)
			break
		}
	}
	for i := 0; i < n; i++ {
		if err := os.Remove(filepath.Join(node.Manifests, fmt.Sprintf("%s-%d.yaml", label, i))); err != nil {
			return 0, err
		}
	}
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("static pods still running 5m after their manifests were removed")
		}
		if idle, err := nothingRuns(ctx, rt); err != nil {
			return 0, err
		} else if idle {
			break
		}
	}
	// Their mirror pods go too; let the API settle before the next burst.
	time.Sleep(3 * time.Second)
	return took, nil
}

// nothingRuns reports that the runtime has no running container and no
// ready sandbox (each node has a containerd of its own).
func nothingRuns(ctx context.Context, rt cri.Runtime) (bool, error) {
	cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return false, err
	}
	ss, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return false, err
	}
	return len(cs) == 0 && len(ss) == 0, nil
}

// statusWrites counts the pod status writes (PUT or PATCH of pods/status)
// of the pods named prefix* (the burst's, not the mirror pods of an
// earlier static burst) and all the writes node made so far, from the
// audit log.
func statusWrites(audit, node, prefix string) (status, all int, err error) {
	f, err := os.Open(audit)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	user := "system:node:" + node
	n, a := 0, 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Stage     string                    `json:"stage"`
			Verb      string                    `json:"verb"`
			User      struct{ Username string } `json:"user"`
			ObjectRef struct {
				Resource, Subresource, Name string
			} `json:"objectRef"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.Stage != "ResponseComplete" || ev.User.Username != user {
			continue
		}
		a++
		if ev.ObjectRef.Resource == "pods" && ev.ObjectRef.Subresource == "status" && (ev.Verb == "update" || ev.Verb == "patch") && strings.HasPrefix(ev.ObjectRef.Name, prefix) {
			n++
		}
	}
	return n, a, sc.Err()
}

// parallel runs f(0..n-1) on 10 goroutines and returns the first error.
func parallel(n int, f func(int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for w := 0; w < 10; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// burstClient is a clientset whose rate limit does not pace the burst.
func burstClient(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	return kubernetes.NewForConfig(cfg)
}

func waitNodeReady(ctx context.Context, cs *kubernetes.Clientset, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last *v1.Node
	for time.Now().Before(deadline) {
		if n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
			last = n
			if nodeReady(n) == v1.ConditionTrue {
				return nil
			}
		}
		time.Sleep(time.Second)
	}
	if last == nil {
		return fmt.Errorf("node %s not registered within %s", name, timeout)
	}
	return fmt.Errorf("node %s not Ready within %s: %+v", name, timeout, last.Status.Conditions)
}

func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
