package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/criaudit"
)

var (
	fullRun  = flag.Bool("chaos.full", false, "the full run of make chaos: 50 pods, 10 minutes, containerd restarted twice")
	seedFlag = flag.Uint64("chaos.seed", 0, "random seed (0: from the clock)")
)

const (
	nodeName = "chaos"
	genKey   = "chaos.speclet.io/generation"
)

type params struct {
	pods               int
	duration           time.Duration
	kills              int // SIGKILLs of speclet
	containerdRestarts int
	pBefore, pAfter    float64 // fault probabilities per CRI call
	pDelay             float64
	settle             time.Duration // the most a checkpoint waits for the node to settle
	verbosity          int           // the daemon's -v
}

var (
	// The short run injects only faults the runtime never sees (a call
	// failed before it is forwarded, or held past the caller's deadline);
	// the full run also loses replies of calls that ran (see the package
	// doc for what that finds).
	shortParams = params{pods: 8, duration: 100 * time.Second, kills: 2, containerdRestarts: 1,
		pBefore: 0.03, pAfter: 0, pDelay: 0.005, settle: 3 * time.Minute, verbosity: 4}
	fullParams = params{pods: 50, duration: 10 * time.Minute, kills: 6, containerdRestarts: 2,
		pBefore: 0.03, pAfter: 0.01, pDelay: 0.005, settle: 5 * time.Minute, verbosity: 2}
)

// requestTimeout is the daemon's --runtime-request-timeout; a delayed
// call is held longer than that.
const (
	requestTimeout = 10 * time.Second
	faultDelayFor  = requestTimeout + time.Second
)

// run is one chaos run: containerd, the proxy, the daemon and the pods.
type run struct {
	t     *testing.T
	p     params
	rng   *rand.Rand
	tmp   string
	c     *harness.Containerd
	rt    *cri.Client // direct, not through the proxy
	proxy *faultProxy
	d     *daemon
	start time.Time

	mu       sync.Mutex
	declared map[string]int // pod name -> generation of its manifest
	nextPod  int
	churned  int // adds, edits and removes
	violated []string
	// leaked: containerd shims of sandboxes the runtime had already
	// removed, with nothing running in them (id -> shim command line): the
	// runtime's own leak, reported but not a violation (see shimLeft).
	leaked map[string]string
	// lost: containers containerd reports EXITED after it lost their task
	// creation and keeps (id -> pod, container and message): the
	// runtime's own leak, reported but not a violation (see lostStarts).
	lost map[string]string
	// cut: every container the sampler saw EXITED with the status of a
	// cancelled task creation or start (lostStart), id -> "pod/container:
	// message"; exitSeen: the EXITED containers it already asked about.
	cut, exitSeen map[string]string

	samples   []sample
	unsettled bool // a checkpoint did not settle
}

type sample struct {
	at, uptime time.Duration
	rssKiB     int
	goroutines int
}

func (r *run) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.violated = append(r.violated, msg)
	r.mu.Unlock()
	r.t.Errorf("invariant violation: %s", msg)
}

func TestChaos(t *testing.T) {
	if os.Geteuid() != 0 {
		msg := "the chaos suite runs containerd and needs root"
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %s", msg)
		}
		t.Skip(msg)
	}
	if testing.Short() {
		t.Skip("-short")
	}
	p := shortParams
	if *fullRun {
		p = fullParams
	}
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	fmt.Fprintf(os.Stderr, "chaos: seed %d (rerun: go test ./test/chaos -run TestChaos -args -chaos.seed %d%s)\n", seed, seed, map[bool]string{true: " -chaos.full"}[*fullRun])
	t.Logf("seed %d", seed)
	r := &run{t: t, p: p, rng: rand.New(rand.NewPCG(seed, seed+1)), declared: map[string]int{}}
	r.setup(seed)

	// The disruptions, at random moments, at least 20 s apart.
	type disruption struct {
		at   time.Duration
		kind string
	}
	var plan []disruption
	for i := 0; i < p.kills; i++ {
		plan = append(plan, disruption{kind: "kill -9 speclet"})
	}
	for i := 0; i < p.containerdRestarts; i++ {
		plan = append(plan, disruption{kind: "restart containerd"})
	}
	r.rng.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	slot := p.duration / time.Duration(len(plan)+1)
	for i := range plan {
		plan[i].at = slot*time.Duration(i+1) + time.Duration(r.rng.Int64N(int64(slot/3))) - slot/6
	}

	for i := 0; i < p.pods; i++ {
		r.addPod()
	}
	r.proxy.enabled.Store(true)
	r.start = time.Now()
	stopSampling := r.sampleLoop()
	restarts := 0
	for _, ev := range plan {
		r.churnUntil(r.start.Add(ev.at))
		t.Logf("%s: %s", time.Since(r.start).Round(time.Second), ev.kind)
		switch ev.kind {
		case "kill -9 speclet":
			r.d.kill()
			// Churn while it is down: the restarted daemon must catch up.
			r.churnUntil(time.Now().Add(time.Duration(2+r.rng.IntN(4)) * time.Second))
			if err := r.d.run(); err != nil {
				t.Fatalf("restart speclet: %v", err)
			}
		case "restart containerd":
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			err := r.c.Restart(ctx)
			cancel()
			if err != nil {
				t.Fatalf("restart containerd: %v", err)
			}
		}
		restarts++
		r.checkpoint(ev.kind)
	}
	r.churnUntil(r.start.Add(p.duration))
	stopSampling()
	r.checkpoint("end of churn")
	r.checkFlat()

	// Remove everything: the runtime and the root dir must end empty.
	r.mu.Lock()
	for name := range r.declared {
		os.Remove(r.manifest(name))
		delete(r.declared, name)
	}
	r.mu.Unlock()
	r.checkpoint("all pods removed")
	r.checkAudit()

	faults, nFaults := r.proxy.Faults()
	var b strings.Builder
	fmt.Fprintf(&b, "\nchaos summary (seed %d, %d pods, %s)\n", seed, p.pods, p.duration)
	fmt.Fprintf(&b, "  %-36s %d\n", "CRI calls through the proxy", r.proxy.calls.Load())
	fmt.Fprintf(&b, "  %-36s %d\n", "faults injected", nFaults)
	b.WriteString(formatFaults(faults))
	fmt.Fprintf(&b, "  %-36s %d (%d kill -9 of speclet, %d containerd restarts)\n", "restarts survived", restarts, p.kills, p.containerdRestarts)
	fmt.Fprintf(&b, "  %-36s %d\n", "pods churned (add, edit, remove)", r.churned)
	fmt.Fprintf(&b, "  %-36s %d\n", "resource samples", len(r.samples))
	fmt.Fprintf(&b, "  %-36s %d\n", "runtime leaks (idle shims)", len(r.leaked))
	for id, cmd := range r.leaked {
		fmt.Fprintf(&b, "    sandbox %s: %s\n", id[:12], cmd)
	}
	fmt.Fprintf(&b, "  %-36s %d\n", "runtime leaks (lost task creations)", len(r.lost))
	for id, what := range r.lost {
		fmt.Fprintf(&b, "    %s: %s\n", id[:12], what)
	}
	fmt.Fprintf(&b, "  %-36s %d\n", "invariant violations", len(r.violated))
	for _, v := range r.violated {
		fmt.Fprintf(&b, "    %s\n", v)
	}
	fmt.Fprint(os.Stderr, b.String())
	t.Log(b.String())
}

func (r *run) setup(seed uint64) {
	t := r.t
	tmp, err := os.MkdirTemp("", "spl-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	r.tmp = tmp
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(tmp)
		} else {
			t.Logf("kept %s (speclet.log, cri-audit.jsonl)", tmp)
		}
	})
	bin := filepath.Join(tmp, "speclet")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	if out, err := exec.Command(goBin, "build", "-o", bin, "github.com/speclet/speclet/cmd/speclet").CombinedOutput(); err != nil {
		t.Fatalf("go build speclet: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := harness.EnsurePackages(ctx, os.Stderr); err != nil {
		t.Fatal(err)
	}
	c, err := harness.StartContainerd(ctx, harness.Options{Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	t.Cleanup(func() {
		dir := c.Dir
		if err := c.Stop(); err != nil {
			t.Errorf("stop containerd: %v", err)
		}
		if left := harness.Leftovers(dir); len(left) > 0 {
			t.Errorf("processes left after Stop: %v", left)
		}
		if m := harness.Mounts(dir); len(m) > 0 {
			t.Errorf("mounts left after Stop: %v", m)
		}
	})
	rt, err := cri.Dial(ctx, c.Endpoint, cri.WithTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r.rt = rt
	t.Cleanup(func() { rt.Close() })
	proxy, err := startProxy(filepath.Join(tmp, "p.sock"), c.Endpoint, seed, r.p.pBefore, r.p.pAfter, r.p.pDelay, faultDelayFor)
	if err != nil {
		t.Fatal(err)
	}
	r.proxy = proxy
	t.Cleanup(proxy.Stop)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	r.d = &daemon{bin: bin, endpoint: "unix://" + proxy.Socket, manifests: filepath.Join(tmp, "manifests"),
		root: filepath.Join(tmp, "root"), logPath: filepath.Join(tmp, "speclet.log"), audit: filepath.Join(tmp, "cri-audit.jsonl"),
		base: fmt.Sprintf("http://127.0.0.1:%d", port), port: port, verbosity: r.p.verbosity}
	if err := os.MkdirAll(r.d.manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.d.run(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.d.stop() })
}

// --- pods and churn ---

func (r *run) manifest(name string) string { return filepath.Join(r.d.manifests, name+".yaml") }

// podYAML is pod name's manifest at generation gen; the kind of pod
// follows from its number: a sidecar with hooks (Always), a crash loop
// (OnFailure), a long runner (Never), two containers with hooks (Always).
func (r *run) podYAML(name string, gen int) string {
	img := r.c.ImageRef(harness.BusyboxRepo)
	n, _ := strconv.Atoi(strings.TrimPrefix(name, "p"))
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  annotations:\n    %s: \"%d\"\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: 2\n", name, genKey, gen)
	ctr := func(key, cname, cmd string, extra string) {
		fmt.Fprintf(&b, "  - name: %s\n    image: %s\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", %q]\n%s", cname, img, cmd, extra)
	}
	const serve = "trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"
	hooks := "    lifecycle:\n      postStart: {exec: {command: [\"sh\", \"-c\", \"echo started > /tmp/started\"]}}\n      preStop: {exec: {command: [\"sh\", \"-c\", \"sleep 1\"]}}\n"
	switch n % 4 {
	case 0:
		b.WriteString("  restartPolicy: Always\n  initContainers:\n")
		ctr("init", "sidecar", serve, "    restartPolicy: Always\n")
		b.WriteString("  containers:\n")
		ctr("c", "main", serve, hooks)
	case 1:
		b.WriteString("  restartPolicy: OnFailure\n  containers:\n")
		ctr("c", "crash", "sleep 2; exit 3", "")
	case 2:
		b.WriteString("  restartPolicy: Never\n  containers:\n")
		ctr("c", "main", serve, "")
	case 3:
		b.WriteString("  restartPolicy: Always\n  containers:\n")
		ctr("c", "web", serve, hooks)
		ctr("c", "log", serve, "")
	}
	return b.String()
}

func (r *run) write(name string, gen int) {
	path := r.manifest(name)
	tmp := filepath.Join(r.d.manifests, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(r.podYAML(name, gen)), 0o644); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		r.t.Fatal(err)
	}
}

func (r *run) addPod() {
	r.mu.Lock()
	name := fmt.Sprintf("p%03d", r.nextPod)
	r.nextPod++
	r.declared[name] = 1
	r.mu.Unlock()
	r.write(name, 1)
}

// churnOnce adds, edits or removes one pod at random, keeping the count
// within 80..120% of the target.
func (r *run) churnOnce() {
	r.mu.Lock()
	names := make([]string, 0, len(r.declared))
	for n := range r.declared {
		names = append(names, n)
	}
	sort.Strings(names)
	n := len(names)
	op := r.rng.IntN(3)
	r.mu.Unlock()
	switch {
	case op == 0 && n < r.p.pods*6/5+1, n == 0:
		r.addPod()
	case op == 1 && n > r.p.pods*4/5:
		name := names[r.rng.IntN(n)]
		r.mu.Lock()
		delete(r.declared, name)
		r.mu.Unlock()
		os.Remove(r.manifest(name))
	default:
		name := names[r.rng.IntN(n)]
		r.mu.Lock()
		r.declared[name]++
		gen := r.declared[name]
		r.mu.Unlock()
		r.write(name, gen)
	}
	r.mu.Lock()
	r.churned++
	r.mu.Unlock()
}

func (r *run) churnUntil(until time.Time) {
	for time.Now().Before(until) {
		r.churnOnce()
		d := time.Duration(500+r.rng.IntN(2500)) * time.Millisecond
		if left := time.Until(until); left < d {
			d = left
		}
		time.Sleep(d)
	}
}

// --- checks ---

// sampleLoop samples the daemon's RSS and goroutines every 10 s, and the
// runtime every 2 s for duplicates, until the returned stop is called.
func (r *run) sampleLoop() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			r.checkNoDuplicates()
			if i%5 == 4 {
				if s, ok := r.d.sample(); ok {
					s.at = time.Since(r.start)
					r.mu.Lock()
					r.samples = append(r.samples, s)
					r.mu.Unlock()
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// checkNoDuplicates: never two READY sandboxes for one pod name, never two
// running instances of one container of one pod.
func (r *run) checkNoDuplicates() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sbs, err := r.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return // containerd restarting
	}
	cs, err := r.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return
	}
	byName := map[string][]string{}
	for _, sb := range sbs {
		if name := sb.Labels[engine.LabelPodName]; name != "" {
			byName[name] = append(byName[name], sb.Id[:12]+" uid "+sb.Labels[engine.LabelPodUID])
		}
	}
	for name, ids := range byName {
		if len(ids) > 1 {
			r.violation("%s: pod %s has %d READY sandboxes: %v", time.Since(r.start).Round(time.Second), name, len(ids), ids)
		}
	}
	r.noteCutStarts(ctx)
	byCtr := map[string]int{}
	for _, c := range cs {
		if uid := c.Labels[engine.LabelPodUID]; uid != "" {
			byCtr[c.Labels[engine.LabelPodName]+" uid "+uid+" container "+c.Labels[engine.LabelContainerName]]++
		}
	}
	for k, n := range byCtr {
		if n > 1 {
			r.violation("%s: %s runs %d instances", time.Since(r.start).Round(time.Second), k, n)
		}
	}
}

// checkpoint stops the churn and the faults, waits until the node settled
// (bounded by params.settle) and checks the end state: every declared pod
// runs once with its current generation, nothing of any other pod is left.
func (r *run) checkpoint(what string) {
	r.proxy.enabled.Store(false)
	defer r.proxy.enabled.Store(true)
	start := time.Now()
	settle := r.p.settle
	if r.unsettled {
		settle = time.Minute // it did not settle before: do not wait as long again
	}
	var problems []string
	for deadline := time.Now().Add(settle); ; {
		problems = r.settledProblems()
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(problems) > 0 {
		r.unsettled = true
		for _, p := range problems {
			r.violation("after %s, not settled within %s: %s", what, settle, p)
		}
		r.t.Logf("speclet log tail:\n%s", r.d.logTail(60))
		return
	}
	r.t.Logf("checkpoint after %s: settled in %s", what, time.Since(start).Round(100*time.Millisecond))
}

// settledProblems lists what differs from the settled state now.
func (r *run) settledProblems() []string {
	var out []string
	r.mu.Lock()
	want := map[string]int{}
	for n, g := range r.declared {
		want[n+"-"+nodeName] = g
	}
	r.mu.Unlock()
	pods, err := r.d.pods()
	if err != nil {
		return []string{err.Error()}
	}
	live := map[string]string{} // uid -> pod name, of pods that run
	done := map[string]string{} // uid -> pod name, of declared pods that completed
	for _, p := range pods {
		g, ok := want[p.Name]
		if !ok {
			out = append(out, fmt.Sprintf("/pods lists %s, which no manifest declares", p.Name))
			continue
		}
		if p.Annotations[genKey] != strconv.Itoa(g) {
			out = append(out, fmt.Sprintf("/pods has %s at generation %s, want %d", p.Name, p.Annotations[genKey], g))
			continue
		}
		switch p.Status.Phase {
		case v1.PodRunning:
			live[string(p.UID)] = p.Name
		case v1.PodFailed, v1.PodSucceeded:
			// A Never pod whose start failed (containerd restarting) fails,
			// as with kubelet: nothing of it may run; its sandbox is
			// stopped and its dead containers stay until it is removed.
			done[string(p.UID)] = p.Name
		default:
			out = append(out, fmt.Sprintf("pod %s is %s, want Running (or Failed/Succeeded)", p.Name, p.Status.Phase))
			live[string(p.UID)] = p.Name
		}
		delete(want, p.Name)
	}
	for n := range want {
		out = append(out, fmt.Sprintf("pod %s is declared but not in /pods", n))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sbs, err := r.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		return append(out, "ListPodSandbox: "+err.Error())
	}
	cs, err := r.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return append(out, "ListContainers: "+err.Error())
	}
	// Pods of which containerd keeps a container it reports EXITED after
	// losing its task creation (see lostStart): their leftovers are the
	// runtime's, as long as nothing of them runs.
	stuck := r.lostStarts(ctx, cs, live, done)
	ready := map[string]int{}
	for _, sb := range sbs {
		uid := sb.Labels[engine.LabelPodUID]
		if uid == "" {
			continue
		}
		if stuck[uid] {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				out = append(out, fmt.Sprintf("sandbox %s of removed pod %s (uid %s), which holds a lost start, is still READY", sb.Id[:12], sb.Labels[engine.LabelPodName], uid))
			}
			continue
		}
		if _, ok := done[uid]; ok {
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				out = append(out, fmt.Sprintf("completed pod %s (uid %s) still has a READY sandbox %s", sb.Labels[engine.LabelPodName], uid, sb.Id[:12]))
			}
			continue
		}
		if _, ok := live[uid]; !ok {
			out = append(out, fmt.Sprintf("sandbox %s of removed pod %s (uid %s) is still in the runtime (%s)", sb.Id[:12], sb.Labels[engine.LabelPodName], uid, sb.State))
			continue
		}
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready[uid]++
		}
	}
	for uid, name := range live {
		if ready[uid] != 1 {
			out = append(out, fmt.Sprintf("pod %s (uid %s) has %d READY sandboxes, want 1", name, uid, ready[uid]))
		}
	}
	running := map[string]int{}
	for _, c := range cs {
		uid := c.Labels[engine.LabelPodUID]
		if uid == "" {
			continue
		}
		if _, ok := done[uid]; ok {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				out = append(out, fmt.Sprintf("completed pod %s (uid %s) still runs container %s", c.Labels[engine.LabelPodName], uid, c.Labels[engine.LabelContainerName]))
			}
			continue
		}
		if _, ok := live[uid]; !ok {
			if stuck[uid] && c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				continue // RemovePodSandbox stops at the lost start
			}
			out = append(out, fmt.Sprintf("container %s of removed pod %s (uid %s) is still in the runtime (%s)", c.Labels[engine.LabelContainerName], c.Labels[engine.LabelPodName], uid, c.State))
			continue
		}
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running[uid+"/"+c.Labels[engine.LabelContainerName]]++
		}
	}
	for k, n := range running {
		if n > 1 {
			out = append(out, fmt.Sprintf("container %s runs %d instances", k, n))
		}
	}
	// Directories under --root-dir of pods that are not live.
	for _, sub := range []string{"pods", "logs"} {
		ents, _ := os.ReadDir(filepath.Join(r.d.root, sub))
		for _, e := range ents {
			uid := e.Name()
			if sub == "logs" {
				uid = uid[strings.LastIndexByte(uid, '_')+1:]
			}
			_, running := live[uid]
			_, completed := done[uid]
			if !running && !completed && !stuck[uid] {
				out = append(out, fmt.Sprintf("%s is left of a removed pod", filepath.Join(r.d.root, sub, e.Name())))
			}
		}
	}
	// Mounts and shims of sandboxes of removed pods (known from the audit log).
	removed := r.removedSandboxes(live) // of removed and of completed pods
	for _, sb := range sbs {
		uid := sb.Labels[engine.LabelPodUID]
		if stuck[uid] {
			delete(removed, sb.Id) // the runtime keeps it: see lostStarts
		}
		if _, completed := done[uid]; completed {
			// A completed pod keeps its stopped sandbox until it is
			// removed (checked NOTREADY above); containerd may keep its
			// shim and bundle until then too (seen when the
			// StopPodSandbox was cut by a containerd restart: the
			// exited pause task stays in the shim until
			// RemovePodSandbox).
			delete(removed, sb.Id)
		}
	}
	listed := map[string]bool{}
	for _, sb := range sbs {
		listed[sb.Id] = true
	}
	shs := shims()
	for _, sh := range shs {
		for id := range removed {
			if strings.Contains(sh.cmdline, "-id "+id) {
				if msg := r.shimLeft(sh, id, listed[id]); msg != "" {
					out = append(out, msg)
				} else if kids := children(sh.pid); len(kids) > 0 {
					// A lost task's process keeps the sandbox's
					// bundle mounted: the same leak (shimLeft).
					delete(removed, id)
				}
			}
		}
	}
	for _, m := range harness.Mounts(r.c.Dir) {
		for id := range removed {
			if strings.Contains(m, id) {
				out = append(out, fmt.Sprintf("mount %s is left of removed sandbox %s", m, id[:12]))
			}
		}
	}
	sort.Strings(out)
	return out
}

// lostStarts returns the UIDs of removed pods that containerd cannot let
// go of because it lost the task creation of one of their containers, and
// records those containers in r.lost. containerd 1.6 (CRI StartContainer)
// creates the task, asks the shim for its pid and starts it; when the
// caller's context is cancelled in between (here: speclet killed with
// SIGKILL while the call was in flight), StartContainer fails with "failed
// to create containerd task: failed to get task pid: context canceled" (or
// "failed to start containerd task ...: context canceled"), marks the
// container EXITED with reason StartError and exit code 128, and can leave
// the task it created behind, so its shim keeps the container's process.
// A harness experiment that cut 100 StartContainer calls at deadlines
// around their duration left no such task: the window is narrow, and the
// full run (seed 1795455041594445836, pod p091) met it once.
// Every RemoveContainer and RemovePodSandbox then fails with "cannot delete
// running task", and StopContainer does nothing, because containerd stops
// only containers it shows running: the CRI offers no way out
// (containerd issue 11037, open). kubelet is left with the same container.
// It clears when containerd restarts and reloads its tasks. The check still
// asserts what speclet controls: the pod's sandbox is stopped and none of
// its containers runs; the other leftovers of such a pod are reported as
// the runtime's leak in the summary. Only a container whose task containerd
// still holds counts (its runtime v2 bundle exists): an EXITED StartError
// container without a task is an ordinary failed start that speclet must
// remove.
func (r *run) lostStarts(ctx context.Context, cs []*runtimeapi.Container, live, done map[string]string) map[string]bool {
	stuck := map[string]bool{}
	tasks := map[string]bool{}
	for _, id := range r.c.TaskIDs() {
		tasks[id] = true
	}
	for _, c := range cs {
		uid := c.Labels[engine.LabelPodUID]
		_, running := live[uid]
		_, completed := done[uid]
		if uid == "" || running || completed || c.State != runtimeapi.ContainerState_CONTAINER_EXITED || !tasks[c.Id] {
			continue
		}
		st, err := r.rt.ContainerStatus(ctx, c.Id)
		if err != nil || !lostStart(st) {
			continue
		}
		stuck[uid] = true
		r.mu.Lock()
		if r.lost == nil {
			r.lost = map[string]string{}
		}
		if _, seen := r.lost[c.Id]; !seen {
			r.t.Logf("runtime leak: container %s of removed pod %s is EXITED (%s: %s) but containerd keeps its task", c.Id[:12], c.Labels[engine.LabelPodName], st.Reason, st.Message)
		}
		r.lost[c.Id] = fmt.Sprintf("pod %s, container %s: %s", c.Labels[engine.LabelPodName], c.Labels[engine.LabelContainerName], st.Message)
		r.mu.Unlock()
	}
	return stuck
}

// noteCutStarts records the containers the runtime shows EXITED after a
// cancelled task creation or start (lostStart), whatever speclet does with
// them later: containerd may have created their process anyway and lose
// track of it (see shimLeft).
func (r *run) noteCutStarts(ctx context.Context) {
	cs, err := r.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED}})
	if err != nil {
		return
	}
	for _, c := range cs {
		r.mu.Lock()
		_, seen := r.exitSeen[c.Id]
		r.mu.Unlock()
		if seen {
			continue
		}
		st, err := r.rt.ContainerStatus(ctx, c.Id)
		if err != nil {
			continue
		}
		r.mu.Lock()
		if r.exitSeen == nil {
			r.exitSeen, r.cut = map[string]string{}, map[string]string{}
		}
		r.exitSeen[c.Id] = ""
		if lostStart(st) {
			r.cut[c.Id] = fmt.Sprintf("pod %s, container %s: %s", c.Labels[engine.LabelPodName], c.Labels[engine.LabelContainerName], st.Message)
		}
		r.mu.Unlock()
	}
}

// lostStart reports whether a container status is the one containerd
// leaves when it lost a task creation (see lostStarts).
func lostStart(st *runtimeapi.ContainerStatus) bool {
	return st.State == runtimeapi.ContainerState_CONTAINER_EXITED && st.Reason == "StartError" &&
		strings.Contains(st.Message, "containerd task") && strings.Contains(st.Message, "context canceled")
}

// removedSandboxes returns the sandbox IDs the audit log shows were created
// for pods that are not live.
func (r *run) removedSandboxes(live map[string]string) map[string]bool {
	recs := r.readAudit()
	out := map[string]bool{}
	for _, rec := range recs {
		if rec.Method == "RunPodSandbox" && rec.Result != "" {
			if _, ok := live[rec.Pod]; !ok {
				out[rec.Result] = true
			}
		}
	}
	return out
}

func (r *run) readAudit() []criaudit.Record {
	f, err := os.Open(r.d.audit)
	if err != nil {
		return nil
	}
	defer f.Close()
	recs, _ := criaudit.ReadLog(f)
	return recs
}

// shimLeft judges a shim still running for sandbox id of a removed pod. A
// sandbox the runtime still lists is a violation of its own (reported
// above), and so is a shim with processes under it: something of the pod
// still runs. A shim with no process left, of a sandbox the runtime no
// longer lists, is containerd's leak, not speclet's: the sandbox was
// stopped and removed through the CRI and containerd forgot its shim. The
// full run (seed 1795455041594445836) met it for a sandbox that containerd
// reported NOTREADY right after its own restart while the shim lived on;
// speclet's StopPodSandbox and RemovePodSandbox of it succeeded; kubelet
// would be left with the same shim (containerd issues 6771, 8931, 10421).
// It is reported in the summary and returns "".
func (r *run) shimLeft(sh shim, id string, listed bool) string {
	kids := children(sh.pid)
	switch {
	case listed:
		return fmt.Sprintf("shim %q is left of removed sandbox %s, which the runtime still lists", sh.cmdline, id[:12])
	case len(kids) > 0:
		if cut := r.cutProcesses(kids); cut != "" {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.lost == nil {
				r.lost = map[string]string{}
			}
			if _, seen := r.lost[id]; !seen {
				r.t.Logf("runtime leak: shim of removed sandbox %s runs %s", id[:12], cut)
			}
			r.lost[id] = "shim of removed sandbox " + id[:12] + " runs " + cut
			return ""
		}
		return fmt.Sprintf("shim %q of removed sandbox %s still runs %d processes: %s", sh.cmdline, id[:12], len(kids), strings.Join(kids, "; "))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leaked == nil {
		r.leaked = map[string]string{}
	}
	if _, seen := r.leaked[id]; !seen {
		r.t.Logf("runtime leak: shim %q of sandbox %s, which the runtime no longer lists, runs no process", sh.cmdline, id[:12])
	}
	r.leaked[id] = sh.cmdline
	return ""
}

// cutProcesses describes kids (children's "pid comm") when every one of
// them runs in the cgroup of a container the sampler saw EXITED after a
// cancelled task creation or start (r.cut), and returns "" otherwise. The
// full run met it: containerd reported "failed to create shim task:
// context canceled", marked the container EXITED, removed it and its
// sandbox through the CRI when speclet asked, and the shim went on running
// the container's process, which no CRI call can reach any more.
func (r *run) cutProcesses(kids []string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, k := range kids {
		pid, _, _ := strings.Cut(k, " ")
		cg, err := os.ReadFile(filepath.Join("/proc", pid, "cgroup"))
		if err != nil {
			return ""
		}
		found := ""
		for cid, what := range r.cut {
			if strings.Contains(string(cg), cid) {
				found = fmt.Sprintf("process %s of container %s (%s)", k, cid[:12], what)
				break
			}
		}
		if found == "" {
			return ""
		}
		out = append(out, found)
	}
	return strings.Join(out, "; ")
}

// shim is a containerd shim process.
type shim struct {
	pid     int
	cmdline string
}

// shims returns the containerd shims running.
func shims() []shim {
	var out []shim
	for _, pid := range pids() {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil || !strings.Contains(string(b), "containerd-shim") {
			continue
		}
		out = append(out, shim{pid, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")})
	}
	return out
}

// children returns "pid command" of the live processes whose parent is pid.
func children(pid int) []string {
	var out []string
	for _, p := range pids() {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		st := string(b)
		i := strings.LastIndexByte(st, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(st[i+1:])
		if len(f) < 2 || f[0] == "Z" || f[1] != strconv.Itoa(pid) {
			continue
		}
		out = append(out, fmt.Sprintf("%d %s", p, st[strings.IndexByte(st, '(')+1:i]))
	}
	return out
}

// pids lists the processes in /proc.
func pids() []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// checkAudit: no RunPodSandbox, CreateContainer or StartContainer of a pod
// after the StopPodSandbox of its termination; and the calls keep the
// spec's cri lists (criaudit.Check).
func (r *run) checkAudit() {
	recs := r.readAudit()
	if len(recs) == 0 {
		r.violation("the CRI audit log %s is empty", r.d.audit)
		return
	}
	owner := map[string]string{} // sandbox or container id -> pod uid
	stopped := map[string]int{}  // pod uid -> index of its termination's StopPodSandbox
	for i, rec := range recs {
		switch rec.Method {
		case "RunPodSandbox", "CreateContainer":
			if rec.Result != "" {
				owner[rec.Result] = rec.Pod
			}
			if j, ok := stopped[rec.Pod]; ok && rec.Pod != "" {
				r.violation("audit: %s of pod %s (record %d) after its StopPodSandbox (record %d)", rec.Method, rec.Pod, i, j)
			}
		case "StartContainer":
			uid := owner[rec.ID]
			if j, ok := stopped[uid]; ok && uid != "" {
				r.violation("audit: StartContainer %s of pod %s (record %d) after its StopPodSandbox (record %d)", rec.ID[:12], uid, i, j)
			}
		case "StopPodSandbox":
			if uid := owner[rec.ID]; uid != "" && rec.Machine == "sandbox" {
				if _, ok := stopped[uid]; !ok {
					stopped[uid] = i
				}
			}
		}
	}
	if v := criaudit.Check(recs); len(v) > 0 {
		r.violation("audit: %d calls break the spec's cri lists:\n%s", len(v), criaudit.FormatViolations(v))
	}
	r.t.Logf("audit: %d CRI calls of the daemons, %d pods terminated", len(recs), len(stopped))
}

// checkFlat: from the second minute on, RSS and goroutines do not grow.
func (r *run) checkFlat() {
	var s []sample
	for _, x := range r.samples {
		if x.at >= time.Minute && x.uptime >= 30*time.Second {
			s = append(s, x)
		}
	}
	if len(s) < 2 {
		r.t.Logf("resources: %d samples from the second minute on (need 2 to compare)", len(s))
		return
	}
	minR, maxR, minG, maxG := s[0].rssKiB, s[0].rssKiB, s[0].goroutines, s[0].goroutines
	for _, x := range s {
		minR, maxR = min(minR, x.rssKiB), max(maxR, x.rssKiB)
		minG, maxG = min(minG, x.goroutines), max(maxG, x.goroutines)
	}
	r.t.Logf("resources from the second minute on (%d samples): RSS %d..%d KiB, goroutines %d..%d", len(s), minR, maxR, minG, maxG)
	if maxR > minR*3/2+30*1024 {
		r.violation("RSS grew from %d KiB to %d KiB", minR, maxR)
	}
	if maxG > minG*3/2+50 {
		r.violation("goroutines grew from %d to %d", minG, maxG)
	}
}

// --- the daemon ---

type daemon struct {
	bin, endpoint, manifests, root, logPath, audit, base string
	port, verbosity                                      int

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	started time.Time
}

// run starts speclet and waits until /healthz answers ok (it only does
// once the state was rebuilt from the runtime).
func (d *daemon) run() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== speclet start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(d.bin, "run", "--container-runtime-endpoint", d.endpoint, "--pod-manifest-path", d.manifests,
		"--root-dir", d.root, "--pod-logs-dir", filepath.Join(d.root, "logs"), "--container-log-links-dir", filepath.Join(d.root, "containers"), "--device-plugins-dir", filepath.Join(d.root, "device-plugins"), "--node-name", nodeName, "--read-only-port", fmt.Sprint(d.port), "--port", "0", "--healthz-port", "0",
		"--sync-frequency", "10s", "--crashloop-backoff-base", "1s", "--image-pull-backoff-base", "1s",
		"--runtime-request-timeout", requestTimeout.String(), "--runtime-wait", "60s", "--cri-audit-log", d.audit, "-v", strconv.Itoa(d.verbosity))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	d.cmd, d.exited, d.started = cmd, exited, time.Now()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		select {
		case <-exited:
			return fmt.Errorf("speclet exited at start: %s; log:\n%s", cmd.ProcessState, d.logTail(30))
		default:
		}
		if resp, err := http.Get(d.base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
	}
	return fmt.Errorf("speclet /healthz not ok within 2m; log:\n%s", d.logTail(30))
}

func (d *daemon) kill() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.exited
		d.cmd = nil
	}
}

func (d *daemon) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		<-d.exited
	}
	d.cmd = nil
}

// logTail returns the last n lines of the daemon's log above debug level.
func (d *daemon) logTail(n int) string {
	b, _ := os.ReadFile(d.logPath)
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.Contains(l, "level=DEBUG") && !strings.Contains(l, "level=DEBUG-4") && !strings.Contains(l, "SyncLoop (PLEG)") {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (d *daemon) pods() ([]v1.Pod, error) {
	resp, err := http.Get(d.base + "/pods")
	if err != nil {
		return nil, fmt.Errorf("GET /pods: %w", err)
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET /pods: %d %v", resp.StatusCode, err)
	}
	return list.Items, nil
}

// sample reads the daemon's RSS (/proc) and goroutines (/metrics).
func (d *daemon) sample() (sample, bool) {
	d.mu.Lock()
	cmd, started := d.cmd, d.started
	d.mu.Unlock()
	if cmd == nil {
		return sample{}, false
	}
	s := sample{uptime: time.Since(started)}
	mem, err := harness.ProcStatus(cmd.Process.Pid, "VmRSS")
	if err != nil {
		return s, false
	}
	s.rssKiB = int(mem["VmRSS"] >> 10)
	resp, err := http.Get(d.base + "/metrics")
	if err != nil {
		return s, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			s.goroutines, _ = strconv.Atoi(strings.TrimSpace(v))
			return s, s.rssKiB > 0
		}
	}
	return s, false
}
