package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/eviction"
	"github.com/speclet/speclet/engine/resources"
)

// scriptHarness runs an Engine against the simulated runtime served over gRPC,
// with a fake clock shared by both. Scripts in testdata/ drive it.
// recorder keeps the events the engine records (Config.Events).
type recorder struct {
	dir   string // the test's directory, shown as $DIR (runtime errors name its socket)
	mu    sync.Mutex
	lines []string
	keys  []string // pod and fieldPath of each line
}

func (r *recorder) Event(pod *v1.Pod, fieldPath, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	line := pod.Name + " " + eventType + " " + reason
	if fieldPath != "" {
		line += " " + fieldPath
	}
	r.lines = append(r.lines, line+": "+strings.ReplaceAll(message, r.dir, "$DIR"))
	r.keys = append(r.keys, pod.Name+" "+fieldPath)
}

// NodeEvent keeps an event about the node, shown as "(node) ...".
func (r *recorder) NodeEvent(eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, "(node) "+eventType+" "+reason+": "+strings.ReplaceAll(message, r.dir, "$DIR"))
	r.keys = append(r.keys, "(node)")
}

// take returns the events recorded since the last call, grouped by pod and
// container (containers start concurrently), in order within one.
func (r *recorder) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	idx := make([]int, len(r.lines))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return r.keys[idx[a]] < r.keys[idx[b]] })
	lines := make([]string, len(idx))
	for i, j := range idx {
		lines[i] = r.lines[j]
	}
	out := strings.Join(lines, "\n")
	r.lines, r.keys = nil, nil
	if out == "" {
		return "none"
	}
	return out
}

type scriptHarness struct {
	recorded *recorder
	t        *testing.T
	clk      *clocktesting.FakeClock
	t0       time.Time // the fake clock's start
	logw     io.Writer // when set, the engine's info log goes here
	srv      *sim.Server
	rt       *cri.Client // the test's own calls (crictl-rm, runtime listings)
	audit    audited     // the engine's runtime: a client of srv through the CRI audit
	dir      string
	eng      *Engine
	reg      *prometheus.Registry
	updates  chan config.PodUpdate
	cancel   context.CancelFunc
	done     chan error
	cfg      Config
	probes   chan ProbeResult
	events   *eventLog
	// imageFs is the capacity of the simulated image filesystem; its
	// available bytes are the capacity less the sizes of the images present.
	imageFs uint64
	// signals are the eviction signals Config.Signals reports (the
	// `signal` command); signalsErr fails the next measurement.
	sigMu      sync.Mutex
	signals    eviction.Observations
	signalsErr int
}

// measure is Config.Signals in scripts: the scripted signals, and
// imagefs.available from the simulated image filesystem when asked for.
func (h *scriptHarness) measure(_ context.Context, imageFs string) (eviction.Observations, error) {
	h.sigMu.Lock()
	defer h.sigMu.Unlock()
	if h.signalsErr > 0 {
		h.signalsErr--
		return nil, errors.New("read /proc/meminfo: scripted failure")
	}
	out := eviction.Observations{}
	for k, v := range h.signals {
		out[k] = v
	}
	if _, scripted := out["imagefs.available"]; !scripted && imageFs != "" {
		if c, a, err := h.fsStat(imageFs); err == nil {
			out["imagefs.available"] = eviction.Observation{Available: int64(a), Capacity: int64(c)}
		}
	}
	return out, nil
}

// eventLog keeps the log records that stand for kubelet's events
// (Unhealthy, Killing, ProbeWarning) for the `events` command.
type eventLog struct {
	inner slog.Handler
	mu    *sync.Mutex
	lines *[]string
}

func (l *eventLog) Enabled(ctx context.Context, lv slog.Level) bool { return l.inner.Enabled(ctx, lv) }
func (l *eventLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &eventLog{inner: l.inner.WithAttrs(as), mu: l.mu, lines: l.lines}
}
func (l *eventLog) WithGroup(g string) slog.Handler {
	return &eventLog{inner: l.inner.WithGroup(g), mu: l.mu, lines: l.lines}
}
func (l *eventLog) Handle(ctx context.Context, r slog.Record) error {
	switch r.Message {
	case "Unhealthy", "Killing", "ProbeWarning":
		line := r.Message
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "container" || a.Key == "message" {
				line += " " + a.Key + "=" + strconv.Quote(a.Value.String())
			}
			return true
		})
		l.mu.Lock()
		*l.lines = append(*l.lines, line)
		l.mu.Unlock()
	}
	if !l.inner.Enabled(ctx, r.Level) {
		return nil
	}
	return l.inner.Handle(ctx, r)
}

// take returns the records kept since the last call, grouped by container
// (probes of different containers run concurrently), in order within one.
func (l *eventLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctr := func(line string) string {
		_, after, _ := strings.Cut(line, "container=")
		return after[:strings.IndexByte(after+" ", ' ')]
	}
	sort.SliceStable(*l.lines, func(i, j int) bool { return ctr((*l.lines)[i]) < ctr((*l.lines)[j]) })
	out := strings.Join(*l.lines, "\n")
	*l.lines = nil
	if out == "" {
		return "none"
	}
	return out
}

func newHarness(t *testing.T) *scriptHarness {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := &scriptHarness{t: t, clk: clocktesting.NewFakeClock(t0), t0: t0, dir: t.TempDir()}
	srv, err := sim.Start(h.dir, sim.Options{Clock: h.clk, Images: []string{"busybox:latest"}})
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	srv.Runtime.RecordCalls()
	rt, err := cri.Dial(context.Background(), srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	h.rt = rt
	h.audit = auditRuntime(t, srv.Endpoint) // its check runs after the cleanup below stopped the engine
	t.Cleanup(func() {
		h.stop()
		srv.Stop()
	})
	return h
}

func (h *scriptHarness) start(cfg Config) {
	h.t.Helper()
	h.launch(cfg)
	h.send(config.PodUpdate{Op: config.OpAdd, Source: config.SourceFile}) // the source's first snapshot
}

// launch starts the engine without sending the source's first snapshot.
func (h *scriptHarness) launch(cfg Config) {
	h.t.Helper()
	cfg.Runtime = h.audit
	h.probes = make(chan ProbeResult)
	cfg.ProbeResults = h.probes
	cfg.RootDir = filepath.Join(h.dir, "root")
	cfg.Clock = h.clk
	cfg.NodeName = "node"
	if cfg.FsStat == nil {
		cfg.FsStat = h.fsStat
	}
	h.reg = prometheus.NewRegistry()
	cfg.Registerer = h.reg
	var logh slog.Handler = slog.NewTextHandler(io.Discard, nil)
	if h.logw != nil {
		logh = slog.NewTextHandler(h.logw, nil) // info level, as a default daemon logs
	} else if testing.Verbose() {
		logh = slog.NewTextHandler(testWriter{h.t}, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	h.events = &eventLog{inner: logh, mu: &sync.Mutex{}, lines: new([]string)}
	cfg.Log = coverageLogger(h.events)
	if h.recorded == nil {
		h.recorded = &recorder{dir: h.dir}
	}
	cfg.Events = h.recorded
	cfg.NodeEvents = h.recorded
	e, err := New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.cfg = cfg
	h.eng = e
	h.updates = make(chan config.PodUpdate)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- e.Run(ctx, h.updates) }()
}

// fsStat is the engine's FsStat on the simulated runtime: the image
// filesystem (sim.ImageFsMountpoint) holds exactly the images present.
func (h *scriptHarness) fsStat(path string) (capacity, available uint64, err error) {
	if path != sim.ImageFsMountpoint {
		return 0, 0, fmt.Errorf("statfs %s: no such file or directory", path)
	}
	capacity = h.imageFs
	if capacity == 0 {
		capacity = 1 << 40
	}
	used := h.srv.Runtime.ImageBytes()
	return capacity, capacity - min(used, capacity), nil
}

// formatImages lists the images present, by first reference, sorted.
func (h *scriptHarness) formatImages() string {
	imgs, err := h.rt.ListImages(context.Background(), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	var lines []string
	for _, img := range imgs {
		lines = append(lines, fmt.Sprintf("%s %s", img.RepoTags[0], resource.NewQuantity(int64(img.Size), resource.BinarySI)))
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		return "none"
	}
	return strings.Join(lines, "\n")
}

// formatNodeHistory prints the node machine's transitions since the last
// call, each with its time since the harness's start and its actions.
func (h *scriptHarness) formatNodeHistory(from int) (string, int) {
	all := h.eng.NodeHistory()
	var b strings.Builder
	for _, t := range all[min(from, len(all)):] {
		fmt.Fprintf(&b, "+%s %s -%s-> %s", t.Time.Sub(h.t0), t.From, t.Event, t.To)
		for i, a := range t.Actions {
			sep := ", "
			if i == 0 {
				sep = " / "
			}
			b.WriteString(sep + a.Action)
			if a.Error != "" {
				// The socket path and container IDs change from run to run.
				msg := criEndpoint.ReplaceAllString(a.Error, "cri: ")
				b.WriteString(" (error: " + quotedContainerID.ReplaceAllString(msg, `"<container-id>"`) + ")")
			}
		}
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "none", len(all)
	}
	return strings.TrimSuffix(b.String(), "\n"), len(all)
}

// criEndpoint matches the endpoint a CRI error names.
var criEndpoint = regexp.MustCompile(`cri unix://\S+\.sock: `)

// quotedContainerID matches a container ID a CRI error quotes.
var quotedContainerID = regexp.MustCompile(`"[0-9a-f]{64}"`)

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (h *scriptHarness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		h.t.Errorf("Run did not return 10 s after its context ended")
	}
	h.cancel = nil
}

func (h *scriptHarness) send(u config.PodUpdate) {
	select {
	case h.updates <- u:
	case <-time.After(5 * time.Second):
		h.t.Fatal("engine did not take a config update within 5 s")
	}
	h.settle()
}

// settle waits (in real time) until the engine has nothing queued or
// running and the simulated runtime applied its scripted exits. A worker
// blocked on the fake clock (a slow call, a stop waiting for its timeout)
// stays busy without progress; settle then returns after 500 ms without
// progress, and the script shows that state.
func (h *scriptHarness) settle() {
	deadline := time.Now().Add(10 * time.Second)
	idle := 0
	last, lastChange := h.eng.progress.Load(), time.Now()
	for time.Now().Before(deadline) {
		h.srv.Runtime.Settle()
		if p := h.eng.progress.Load(); p != last {
			last, lastChange = p, time.Now()
		}
		if h.eng.busy.Load() == 0 {
			idle++
			if idle >= 5 {
				return
			}
		} else {
			idle = 0
			if time.Since(lastChange) > 500*time.Millisecond {
				return
			}
		}
		time.Sleep(3 * time.Millisecond)
	}
}

// step advances the fake clock by d in steps of at most one second, settling
// after each, as the real tickers would see time pass.
func (h *scriptHarness) step(d, max time.Duration) {
	for d > 0 {
		s := min(d, max)
		h.clk.Step(s)
		d -= s
		h.settle()
	}
}

// parsePod builds a pod from a script: args on the command line, one
// container per body line:
//
//	add pod=NAME [uid=UID] [restart=Always|OnFailure|Never] [grace=S] [static=false] [network=pod]
//	    [deadline=S (activeDeadlineSeconds)] [node=NODE] [selector=(K:V,...)] [runtime-class=NAME] [gates=(TYPE,...)]
//	container NAME [cpu=Q] [memory=Q] [hostports=PORT[/PROTO],...] [image=REF] [pull=Always|IfNotPresent|Never] [exit=DUR code=N] [term=dies|handle|ignore] [starterr=MSG]
//	          [poststart=HOOK[:CODE[:DELAY]]] [prestop=HOOK[:CODE[:DELAY]]]
//	init NAME ...
//	sidecar NAME ...
func (h *scriptHarness) parsePod(d *datadriven.TestData) *v1.Pod {
	var name, uid, restart string
	grace := int64(30)
	static, hostNetwork := true, true
	for _, a := range d.CmdArgs {
		v := ""
		if len(a.Vals) > 0 {
			v = a.Vals[0]
		}
		switch a.Key {
		case "pod":
			name = v
		case "uid":
			uid = v
		case "restart":
			restart = v
		case "grace":
			g, _ := strconv.ParseInt(v, 10, 64)
			grace = g
		case "static":
			static = v != "false"
		case "network":
			hostNetwork = v != "pod"
		case "deletion-grace", "node", "selector", "runtime-class", "gates", "deadline":
		default:
			h.t.Fatalf("%s: unknown argument %q", d.Pos, a.Key)
		}
	}
	if uid == "" {
		uid = name
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid), Annotations: map[string]string{}},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicy(restart), TerminationGracePeriodSeconds: &grace, HostNetwork: hostNetwork},
	}
	if restart == "" {
		pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if static {
		pod.Annotations[config.AnnotationSource] = config.SourceFile
	} else {
		pod.Annotations[config.AnnotationSource] = config.SourceAPI
	}
	for _, a := range d.CmdArgs {
		v := ""
		if len(a.Vals) > 0 {
			v = a.Vals[0]
		}
		switch a.Key {
		case "node":
			pod.Spec.NodeName = v
		case "selector":
			// K:V,...: spec.nodeSelector.
			pod.Spec.NodeSelector = map[string]string{}
			for _, kv := range a.Vals {
				k, val, _ := strings.Cut(kv, ":")
				pod.Spec.NodeSelector[k] = val
			}
		case "runtime-class":
			pod.Spec.RuntimeClassName = &v
		case "deadline":
			ads, _ := strconv.ParseInt(v, 10, 64)
			pod.Spec.ActiveDeadlineSeconds = &ads
		case "gates":
			for _, g := range a.Vals {
				pod.Spec.ReadinessGates = append(pod.Spec.ReadinessGates, v1.PodReadinessGate{ConditionType: v1.PodConditionType(g)})
			}
		}
	}
	if d.HasArg("deletion-grace") {
		var g int64
		d.ScanArgs(h.t, "deletion-grace", &g)
		pod.DeletionGracePeriodSeconds = &g
	}
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		c := v1.Container{Name: f[1], Image: "busybox:latest", ImagePullPolicy: v1.PullIfNotPresent}
		b := sim.Behavior{}
		var exit *sim.Exit
		var target string // an ephemeral container's targetContainerName
		for _, kv := range f[2:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "target":
				target = v
			case "image":
				c.Image = v
			case "pull":
				c.ImagePullPolicy = v1.PullPolicy(v)
			case "exit":
				dur, err := time.ParseDuration(v)
				if err != nil {
					h.t.Fatalf("%s: %v", d.Pos, err)
				}
				if exit == nil {
					exit = &sim.Exit{}
				}
				exit.After = dur
			case "code":
				n, _ := strconv.Atoi(v)
				if exit == nil {
					exit = &sim.Exit{}
				}
				exit.Code = int32(n)
			case "term":
				b.Term = map[string]sim.Term{"dies": sim.TermDies, "handle": sim.TermHandled, "ignore": sim.TermIgnored}[v]
			case "starterr":
				b.StartError = v
			case "poststart", "prestop":
				// NAME[:CODE[:DELAY]]: an exec hook running NAME, which the
				// runtime answers with exit code CODE after DELAY.
				hook, reply := execHook(h.t, d, v)
				if c.Lifecycle == nil {
					c.Lifecycle = &v1.Lifecycle{}
				}
				if k == "poststart" {
					c.Lifecycle.PostStart = hook
				} else {
					c.Lifecycle.PreStop = hook
				}
				b.Exec = append(b.Exec, reply)
			case "reply":
				// CMD[:CODE[:DELAY]]: how the runtime answers an exec of CMD.
				_, reply := execHook(h.t, d, v)
				b.Exec = append(b.Exec, reply)
			case "liveness", "readiness", "startup":
				p := parseProbe(h.t, d, v)
				switch k {
				case "liveness":
					c.LivenessProbe = p
				case "readiness":
					c.ReadinessProbe = p
				default:
					c.StartupProbe = p
				}
			case "cpu", "memory":
				// Requests (limits are not needed for admission).
				if c.Resources.Requests == nil {
					c.Resources.Requests = v1.ResourceList{}
				}
				c.Resources.Requests[v1.ResourceName(k)] = resource.MustParse(v)
			case "hostports":
				// PORT[/PROTOCOL],...: host ports (container port = host port).
				for _, pp := range strings.Split(v, ",") {
					port, proto, _ := strings.Cut(pp, "/")
					pn, _ := strconv.Atoi(port)
					c.Ports = append(c.Ports, v1.ContainerPort{ContainerPort: int32(pn), HostPort: int32(pn), Protocol: v1.Protocol(proto)})
				}
			case "ports":
				// NAME:PORT,...
				for _, np := range strings.Split(v, ",") {
					n, port, _ := strings.Cut(np, ":")
					pn, _ := strconv.Atoi(port)
					c.Ports = append(c.Ports, v1.ContainerPort{Name: n, ContainerPort: int32(pn)})
				}
			default:
				h.t.Fatalf("%s: unknown container field %q", d.Pos, k)
			}
		}
		b.Exit = exit
		h.srv.Runtime.OnContainer(sim.Match{Pod: name, Name: c.Name}, b)
		switch f[0] {
		case "container":
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		case "init":
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		case "sidecar":
			always := v1.ContainerRestartPolicyAlways
			c.RestartPolicy = &always
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		case "ephemeral":
			pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers,
				v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon(c), TargetContainerName: target})
		default:
			h.t.Fatalf("%s: unknown line %q", d.Pos, line)
		}
	}
	return pod
}

// parseProbe parses HANDLER[,period=S][,failure=N][,success=N][,delay=S][,timeout=S][,grace=S]
// where HANDLER is exec:CMD, http:PORT[:PATH], tcp:PORT or grpc:PORT (hosts
// are 127.0.0.1; PORT is a number or a port name).
func parseProbe(t *testing.T, d *datadriven.TestData, v string) *v1.Probe {
	f := strings.Split(v, ",")
	p := &v1.Probe{}
	h := strings.SplitN(f[0], ":", 3)
	port := func() intstr.IntOrString {
		if len(h) < 2 {
			t.Fatalf("%s: probe %q: no port", d.Pos, v)
		}
		return intstr.Parse(h[1])
	}
	switch h[0] {
	case "exec":
		p.Exec = &v1.ExecAction{Command: []string{h[1]}}
	case "http":
		p.HTTPGet = &v1.HTTPGetAction{Host: "127.0.0.1", Port: port()}
		if len(h) > 2 {
			p.HTTPGet.Path = h[2]
		}
	case "tcp":
		p.TCPSocket = &v1.TCPSocketAction{Host: "127.0.0.1", Port: port()}
	case "grpc":
		p.GRPC = &v1.GRPCAction{Port: port().IntVal}
	default:
		t.Fatalf("%s: probe %q: unknown handler", d.Pos, v)
	}
	for _, kv := range f[1:] {
		k, s, _ := strings.Cut(kv, "=")
		n64, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			t.Fatalf("%s: probe %q: %v", d.Pos, v, err)
		}
		n := int32(n64)
		switch k {
		case "period":
			p.PeriodSeconds = n
		case "failure":
			p.FailureThreshold = n
		case "success":
			p.SuccessThreshold = n
		case "delay":
			p.InitialDelaySeconds = n
		case "timeout":
			p.TimeoutSeconds = n
		case "grace":
			p.TerminationGracePeriodSeconds = &n64
		default:
			t.Fatalf("%s: probe %q: unknown field %q", d.Pos, v, k)
		}
	}
	return p
}

// execHook parses NAME[:CODE[:DELAY]] into an exec hook running NAME and
// the simulated runtime's reply to it.
func execHook(t *testing.T, d *datadriven.TestData, v string) (*v1.LifecycleHandler, sim.ExecReply) {
	f := strings.Split(v, ":")
	reply := sim.ExecReply{Command: f[0]}
	if len(f) > 1 {
		n, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("%s: hook %q: %v", d.Pos, v, err)
		}
		reply.ExitCode = int32(n)
		if reply.ExitCode != 0 {
			reply.Stderr = f[0] + " failed"
		}
	}
	if len(f) > 2 {
		dur, err := time.ParseDuration(f[2])
		if err != nil {
			t.Fatalf("%s: hook %q: %v", d.Pos, v, err)
		}
		reply.Delay = dur
	}
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{f[0]}}}, reply
}

// formatCallLog prints the recorded StartContainer, ExecSync and
// StopContainer calls in order, with their timeouts; sorted by line when
// sorted is set.
func (h *scriptHarness) formatCallLog(sorted bool) string {
	var out []string
	for _, c := range h.srv.Runtime.CallLog() {
		line := c.Method + " " + c.Pod + "/" + c.Container
		switch c.Method {
		case "ExecSync":
			line += fmt.Sprintf(" %v timeout=%d", c.Cmd, c.Timeout)
		case "StopContainer":
			line += fmt.Sprintf(" timeout=%d", c.Timeout)
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return "none"
	}
	if sorted {
		sort.Strings(out)
	}
	return strings.Join(out, "\n")
}

func TestEngineScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := newHarness(t)
		pods := map[string]*v1.Pod{}
		nodeSeen := 0
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "start":
				var cfg Config
				if d.HasArg("crashloop") {
					var s string
					d.ScanArgs(t, "crashloop", &s)
					cfg.CrashLoopBackOffBase, _ = time.ParseDuration(s)
				}
				if d.HasArg("alloc-cpu") || d.HasArg("alloc-memory") {
					var c, m string
					d.ScanArgs(t, "alloc-cpu", &c)
					d.ScanArgs(t, "alloc-memory", &m)
					cfg.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse(c), v1.ResourceMemory: resource.MustParse(m)}
				}
				// Probe jitter is fixed (default 0) so scripts never depend on chance.
				jitter := time.Duration(0)
				if d.HasArg("jitter") {
					var s string
					d.ScanArgs(t, "jitter", &s)
					jitter, _ = time.ParseDuration(s)
				}
				cfg.ProbeJitter = func(time.Duration) time.Duration { return jitter }
				// node-labels=(K:V,...): the Node's labels (Config.Node).
				if d.HasArg("node-labels") {
					n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node", Labels: map[string]string{}}}
					for _, a := range d.CmdArgs {
						if a.Key != "node-labels" {
							continue
						}
						for _, kv := range a.Vals {
							k, v, _ := strings.Cut(kv, ":")
							n.Labels[k] = v
						}
					}
					cfg.Node = func(bool) *v1.Node { return n.DeepCopy() }
				}
				// runtime-classes=(NAME:HANDLER,...): the RuntimeClass API;
				// the handler "!error" makes the lookup of NAME fail.
				if d.HasArg("runtime-classes") {
					classes := map[string]string{}
					for _, a := range d.CmdArgs {
						if a.Key != "runtime-classes" {
							continue
						}
						for _, nh := range a.Vals {
							n, hd, _ := strings.Cut(nh, ":")
							classes[n] = hd
						}
					}
					cfg.RuntimeClasses = func(name string) (string, error) {
						hd, ok := classes[name]
						switch {
						case !ok:
							return "", apierrors.NewNotFound(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclasses"}, name)
						case hd == "!error":
							return "", fmt.Errorf("the RuntimeClass cache is not synced")
						}
						return hd, nil
					}
				}
				if d.HasArg("sources") {
					var s string
					d.ScanArgs(t, "sources", &s)
					cfg.Sources = strings.Split(s, ",")
				}
				if d.HasArg("image-fs") {
					var s string
					d.ScanArgs(t, "image-fs", &s)
					q := resource.MustParse(s)
					h.imageFs = uint64(q.Value())
				}
				if d.HasArg("image-gc-period") {
					var s string
					d.ScanArgs(t, "image-gc-period", &s)
					cfg.ImageGCPeriod, _ = time.ParseDuration(s)
				}
				if d.HasArg("eviction-hard") || d.HasArg("eviction-soft") {
					var hard, soft, grace string
					if d.HasArg("eviction-hard") {
						d.ScanArgs(t, "eviction-hard", &hard)
					}
					if d.HasArg("eviction-soft") {
						d.ScanArgs(t, "eviction-soft", &soft)
						d.ScanArgs(t, "eviction-soft-grace", &grace)
					}
					ht, err := resources.ParseThresholds("eviction-hard", hard)
					if err != nil {
						t.Fatal(err)
					}
					st, err := resources.ParseThresholds("eviction-soft", soft)
					if err != nil {
						t.Fatal(err)
					}
					g, err := eviction.ParseGrace("eviction-soft-grace-period", grace)
					if err != nil {
						t.Fatal(err)
					}
					cfg.Eviction = eviction.NewManager(eviction.Config{Hard: ht, Soft: st, Grace: g, Transition: 30 * time.Second})
					cfg.EvictionPeriod = 10 * time.Second
					cfg.Signals = h.measure
				}
				// Container GC: max-dead-per-container=N, max-dead=N (the
				// node-wide limit), min-container-age=D,
				// container-gc-period=D.
				if d.HasArg("max-dead-per-container") {
					d.ScanArgs(t, "max-dead-per-container", &cfg.ContainerGC.MaxPerContainer)
				}
				if d.HasArg("max-dead") {
					n := 0
					d.ScanArgs(t, "max-dead", &n)
					cfg.ContainerGC.MaxContainers = &n
				}
				if d.HasArg("min-container-age") {
					var s string
					d.ScanArgs(t, "min-container-age", &s)
					cfg.ContainerGC.MinAge, _ = time.ParseDuration(s)
				}
				if d.HasArg("container-gc-period") {
					var s string
					d.ScanArgs(t, "container-gc-period", &s)
					cfg.ContainerGCPeriod, _ = time.ParseDuration(s)
				}
				if d.HasArg("min-image-age") {
					var s string
					d.ScanArgs(t, "min-image-age", &s)
					cfg.ImageGC.MinAge, _ = time.ParseDuration(s)
				}
				h.start(cfg)
				return ""
			case "exec-reply":
				// Change how the runtime answers an exec from now on.
				var pod, name, spec string
				d.ScanArgs(t, "pod", &pod)
				d.ScanArgs(t, "container", &name)
				d.ScanArgs(t, "reply", &spec)
				_, reply := execHook(t, d, spec)
				h.srv.Runtime.SetExec(sim.Match{Pod: pod, Name: name}, reply)
				return ""
			case "restart":
				h.stop()
				h.start(h.cfg)
				return ""
			case "add", "update":
				pod := h.parsePod(d)
				pods[string(pod.UID)] = pod
				op := config.OpAdd
				if d.Cmd == "update" {
					op = config.OpUpdate
				}
				h.send(config.PodUpdate{Op: op, Pods: []*v1.Pod{pod}, Source: config.SourceFile})
				return ""
			case "reconcile":
				// reconcile uid=UID conditions=(TYPE:STATUS,...): the
				// source's status of the pod changed (others' conditions).
				var uid string
				d.ScanArgs(t, "uid", &uid)
				pod := pods[uid].DeepCopy()
				for _, a := range d.CmdArgs {
					if a.Key != "conditions" {
						continue
					}
					for _, kv := range a.Vals {
						k, v, _ := strings.Cut(kv, ":")
						pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: v1.PodConditionType(k), Status: v1.ConditionStatus(v)})
					}
				}
				h.send(config.PodUpdate{Op: config.OpReconcile, Pods: []*v1.Pod{pod}, Source: config.SourceFile})
				return ""
			case "source-ready":
				// A source's first snapshot, declaring no pod.
				var src string
				d.ScanArgs(t, "source", &src)
				h.send(config.PodUpdate{Op: config.OpAdd, Source: src})
				return ""
			case "remove", "delete":
				var uid string
				d.ScanArgs(t, "uid", &uid)
				pod := pods[uid].DeepCopy()
				op := config.OpRemove
				if d.Cmd == "delete" {
					// The API's graceful deletion: the object keeps
					// being listed, marked, until the node deletes it.
					op = config.OpDelete
					var g int64
					d.ScanArgs(t, "grace", &g)
					pod.DeletionGracePeriodSeconds = &g
					ts := metav1.NewTime(h.clk.Now())
					pod.DeletionTimestamp = &ts
					pods[uid] = pod.DeepCopy()
				}
				h.send(config.PodUpdate{Op: op, Pods: []*v1.Pod{pod}, Source: config.SourceFile})
				return ""
			case "tick":
				var s string
				d.ScanArgs(t, "d", &s)
				dur, err := time.ParseDuration(s)
				if err != nil {
					t.Fatal(err)
				}
				step := time.Second
				if d.HasArg("step") {
					d.ScanArgs(t, "step", &s)
					step, _ = time.ParseDuration(s)
				}
				h.step(dur, step)
				return ""
			case "pods":
				return formatPods(h.eng.Pods())
			case "runtime":
				return h.formatRuntime()
			case "calls":
				var out []string
				for _, a := range d.CmdArgs {
					out = append(out, fmt.Sprintf("%s=%d", a.Key, h.srv.Runtime.Calls(a.Key)))
				}
				return strings.Join(out, " ")
			case "events":
				return h.events.take()
			case "recorded":
				// The events recorded through Config.Events (to the API).
				return h.recorded.take()
			case "calllog":
				// calllog [sorted]: sorted for calls made in parallel
				// (containers of one group stop concurrently).
				return h.formatCallLog(d.HasArg("sorted"))
			case "image":
				// An image pulled beside the engine (crictl pull), of size bytes.
				var ref, size string
				d.ScanArgs(t, "ref", &ref)
				d.ScanArgs(t, "size", &size)
				q := resource.MustParse(size)
				h.srv.Runtime.AddImage(ref, uint64(q.Value()))
				return ""
			case "images":
				return h.formatImages()
			case "signal":
				// What the eviction manager measures from now on:
				// signal name=memory.available available=Q capacity=Q,
				// or signal fail=N.
				h.sigMu.Lock()
				if d.HasArg("fail") {
					d.ScanArgs(t, "fail", &h.signalsErr)
				} else {
					var name, avail, capacity string
					d.ScanArgs(t, "name", &name)
					d.ScanArgs(t, "available", &avail)
					d.ScanArgs(t, "capacity", &capacity)
					if h.signals == nil {
						h.signals = eviction.Observations{}
					}
					a, c := resource.MustParse(avail), resource.MustParse(capacity)
					h.signals[name] = eviction.Observation{Available: a.Value(), Capacity: c.Value()}
				}
				h.sigMu.Unlock()
				return ""
			case "usage":
				// What ListContainerStats reports for a pod's containers.
				var pod, mem, disk string
				d.ScanArgs(t, "pod", &pod)
				mem, disk = "0", "0"
				if d.HasArg("memory") {
					d.ScanArgs(t, "memory", &mem)
				}
				if d.HasArg("disk") {
					d.ScanArgs(t, "disk", &disk)
				}
				m, dk := resource.MustParse(mem), resource.MustParse(disk)
				h.srv.Runtime.SetUsage(pod, "", sim.Usage{MemoryWorkingSet: uint64(m.Value()), WritableLayer: uint64(dk.Value())})
				return ""
			case "conditions":
				// The node's pressure conditions (the Node status's source).
				var out []string
				for c, on := range h.eng.cfg.Eviction.Conditions() {
					out = append(out, fmt.Sprintf("%s=%v", c, on))
				}
				sort.Strings(out)
				return strings.Join(out, " ")
			case "node-history":
				// The node machine's transitions since the last node-history.
				out, n := h.formatNodeHistory(nodeSeen)
				nodeSeen = n
				return out
			case "missing-image":
				var ref string
				d.ScanArgs(t, "ref", &ref)
				h.srv.Runtime.MissingImage(ref)
				return ""
			case "slow":
				var call, s string
				d.ScanArgs(t, "call", &call)
				d.ScanArgs(t, "d", &s)
				dur, _ := time.ParseDuration(s)
				h.srv.Runtime.SlowCall(call, dur)
				return ""
			case "fail":
				var call string
				var n int
				d.ScanArgs(t, "call", &call)
				d.ScanArgs(t, "n", &n)
				msg := "scripted failure"
				if d.HasArg("msg") {
					d.ScanArgs(t, "msg", &msg)
				}
				code := codes.Unknown
				if d.HasArg("code") {
					var s string
					d.ScanArgs(t, "code", &s)
					if err := code.UnmarshalJSON([]byte(`"` + strings.ToUpper(s) + `"`)); err != nil {
						t.Fatalf("%s: code %q: %v", d.Pos, s, err)
					}
				}
				h.srv.Runtime.FailCall(call, n, code, msg)
				return ""
			case "lose-reply":
				// The next n calls of a method do their work in the
				// runtime, but the engine sees them fail (deadline
				// exceeded), as when a reply is lost.
				var call string
				var n int
				d.ScanArgs(t, "call", &call)
				d.ScanArgs(t, "n", &n)
				h.srv.Runtime.LoseReply(call, n)
				return ""
			case "start-late":
				// The next n StartContainer calls time out at the client
				// while the runtime holds them back; finish-late-starts
				// carries them out later.
				var n int
				d.ScanArgs(t, "n", &n)
				h.srv.Runtime.StartLate(n)
				return ""
			case "finish-late-starts":
				// The runtime starts what start-late held back; with
				// unknown, it then reports those containers in state
				// UNKNOWN.
				n := h.srv.Runtime.FinishLateStarts(d.HasArg("unknown"))
				h.settle()
				return fmt.Sprintf("started %d\n", n)
			case "crictl-rm":
				// Remove a pod's container behind the engine's back.
				var pod, name string
				d.ScanArgs(t, "pod", &pod)
				d.ScanArgs(t, "container", &name)
				cs, err := h.rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
					LabelSelector: map[string]string{LabelPodUID: pod, LabelContainerName: name}})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range cs {
					if err := h.rt.RemoveContainer(context.Background(), c.Id); err != nil {
						t.Fatal(err)
					}
				}
				h.settle()
				return fmt.Sprintf("removed %d", len(cs))
			case "kill-sandbox":
				// Kill the pause process of a pod's READY sandbox behind
				// the engine's back (kill -9, the OOM killer): the runtime
				// shows the sandbox NOTREADY (see sim.Runtime.KillSandbox).
				var pod string
				d.ScanArgs(t, "pod", &pod)
				sbs, err := h.rt.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{
					LabelSelector: map[string]string{LabelPodUID: pod},
					State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
				if err != nil {
					t.Fatal(err)
				}
				for _, sb := range sbs {
					if err := h.srv.Runtime.KillSandbox(sb.Id); err != nil {
						t.Fatal(err)
					}
				}
				h.settle()
				return fmt.Sprintf("killed %d", len(sbs))
			case "pending":
				// A script of behaviour the engine does not have yet: the
				// input says what it waits for. Remove the directive to run
				// the script.
				t.Skipf("%s: pending: %s", d.Pos, strings.TrimSpace(d.Input))
				return ""
			case "probe":
				var uid, name, kind, result string
				d.ScanArgs(t, "uid", &uid)
				d.ScanArgs(t, "container", &name)
				d.ScanArgs(t, "kind", &kind)
				d.ScanArgs(t, "result", &result)
				k, ok := ParseProbeKind(kind)
				if !ok {
					t.Fatalf("%s: probe kind %q", d.Pos, kind)
				}
				h.probes <- ProbeResult{UID: types.UID(uid), Container: name, Kind: k, Success: result == "success"}
				h.settle()
				return ""
			case "runtime-down":
				h.srv.Stop()
				return ""
			case "runtime-up":
				srv, err := h.srv.Runtime.Serve(h.srv.Socket)
				if err != nil {
					t.Fatal(err)
				}
				h.srv = srv
				// gRPC reconnects on its own real-time backoff: wait until
				// the engine's connection answers again.
				deadline := time.Now().Add(30 * time.Second)
				for {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					_, err := h.audit.Version(ctx) // the engine's client: a read, outside actions
					cancel()
					if err == nil {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("runtime did not answer 30 s after it came back: %v", err)
					}
					time.Sleep(50 * time.Millisecond)
				}
				return ""
			case "healthz":
				err := h.eng.Healthz()
				if err == nil {
					return "ok"
				}
				// The causes name socket paths of this run: keep the gist.
				var out []string
				for _, l := range strings.Split(err.Error(), "\n") {
					l, _, _ = strings.Cut(l, ": cri ")
					l, _, _ = strings.Cut(l, ": relist")
					out = append(out, l)
				}
				return strings.Join(out, "\n")
			case "transitions":
				var machine string
				d.ScanArgs(t, "machine", &machine)
				return h.formatTransitions(machine)
			case "history":
				// What GET /debug/pods/{uid} shows of a pod: its machines
				// now and every transition, with the time since start.
				var uid, machine string
				d.ScanArgs(t, "uid", &uid)
				if d.HasArg("machine") {
					d.ScanArgs(t, "machine", &machine)
				}
				return h.formatHistory(uid, machine)
			default:
				t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
				return ""
			}
		})
	})
}

// formatPods prints what a user reads from GET /pods: phase, conditions and
// per container state, reason, exit code, restarts and readiness.
func formatPods(ps []*v1.Pod) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%s uid=%s phase=%s", p.Name, p.UID, p.Status.Phase)
		if p.Status.Reason != "" {
			fmt.Fprintf(&b, " reason=%s message=%q", p.Status.Reason, p.Status.Message)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled {
				continue
			}
			fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
		}
		b.WriteString("\n")
		for _, cs := range p.Status.InitContainerStatuses {
			fmt.Fprintf(&b, "  init %s\n", formatContainer(cs))
		}
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "  %s\n", formatContainer(cs))
		}
		for _, cs := range p.Status.EphemeralContainerStatuses {
			fmt.Fprintf(&b, "  ephemeral %s\n", formatContainer(cs))
		}
	}
	if b.Len() == 0 {
		return "no pods"
	}
	return strings.TrimRight(b.String(), "\n")
}

func formatContainer(cs v1.ContainerStatus) string {
	s := cs.Name + ": " + formatState(cs.State)
	s += fmt.Sprintf(" restarts=%d ready=%t", cs.RestartCount, cs.Ready)
	if cs.State.Running != nil && cs.Started != nil && !*cs.Started {
		s += " started=false"
	}
	if cs.LastTerminationState.Terminated != nil {
		s += " last=" + formatState(cs.LastTerminationState)
	}
	return s
}

func formatState(st v1.ContainerState) string {
	switch {
	case st.Running != nil:
		return "running"
	case st.Terminated != nil:
		return fmt.Sprintf("terminated(%s,%d)", st.Terminated.Reason, st.Terminated.ExitCode)
	case st.Waiting != nil:
		return "waiting(" + st.Waiting.Reason + ")"
	}
	return "unknown"
}

// formatRuntime prints the simulated runtime's sandboxes and containers.
func (h *scriptHarness) formatRuntime() string {
	ctx := context.Background()
	sbs, err := h.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	cs, err := h.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	names := map[string]string{}
	var lines []string
	for _, s := range sbs {
		names[s.Id] = s.Metadata.Name
		line := fmt.Sprintf("sandbox %s attempt=%d %s", s.Metadata.Name, s.Metadata.Attempt,
			strings.TrimPrefix(s.State.String(), "SANDBOX_"))
		if s.RuntimeHandler != "" {
			line += " handler=" + s.RuntimeHandler
		}
		lines = append(lines, line)
	}
	for _, c := range cs {
		lines = append(lines, fmt.Sprintf("container %s/%s attempt=%d %s", names[c.PodSandboxId], c.Metadata.Name,
			c.Metadata.Attempt, strings.TrimPrefix(c.State.String(), "CONTAINER_")))
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		return "empty"
	}
	return strings.Join(lines, "\n")
}

// formatTransitions prints the non-zero speclet_transitions_total series of
// one machine.
func (h *scriptHarness) formatTransitions(machine string) string {
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		if mf.GetName() != "speclet_transitions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["machine"] != machine || m.GetCounter().GetValue() == 0 {
				continue
			}
			lines = append(lines, fmt.Sprintf("%s -%s-> %s: %v", l["from"], l["event"], l["to"], m.GetCounter().GetValue()))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// formatHistory prints a pod's debug view: machine states, then the
// transitions of machine ("" for all), each with its time since the
// harness's start, guard, choices and actions (errors included).
func (h *scriptHarness) formatHistory(uid, machine string) string {
	p, ok := h.eng.PodHistory(uid)
	if !ok {
		return "no pod " + uid
	}
	var b strings.Builder
	gone := ""
	if p.Gone {
		gone = " (gone)"
	}
	fmt.Fprintf(&b, "%s phase=%s%s\n", p.Name, p.Phase, gone)
	for _, m := range p.Machines {
		fmt.Fprintf(&b, "  %s%s: %s since +%s\n", m.Machine, instance(m.Instance), m.State, m.Since.Sub(h.t0))
	}
	for _, t := range p.History {
		if machine != "" && t.Machine != machine {
			continue
		}
		guard := ""
		if t.Guard != "" {
			guard = " [" + t.Guard + "]"
		}
		fmt.Fprintf(&b, "+%s %s%s: %s -%s%s-> %s", t.Time.Sub(h.t0), t.Machine, instance(t.Instance), t.From, t.Event, guard, t.To)
		if len(t.Choices) > 0 {
			fmt.Fprintf(&b, " via %s", strings.Join(t.Choices, ", "))
		}
		for i, a := range t.Actions {
			sep := ", "
			if i == 0 {
				sep = " / "
			}
			b.WriteString(sep + a.Action)
			if a.Error != "" {
				b.WriteString(" (error)")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func instance(name string) string {
	if name == "" {
		return ""
	}
	return "/" + name
}
