package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/eviction"
)

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

// scriptHarness runs an Engine against the simulated runtime served over gRPC,
// with a fake clock shared by both. Scripts in testdata/ drive it.
type scriptHarness struct {
	recorded *recorder
	t        *testing.T
	clk      *clocktesting.FakeClock
	t0       time.Time // the fake clock's start
	logw     io.Writer // when set, the engine's info log goes here
	srv      *sim.Server
	lisMu    sync.Mutex
	lis      *bufconn.Listener // where srv serves
	rt       *cri.Client       // the test's own calls (crictl-rm, runtime listings)
	audit    audited           // the engine's runtime: a client of srv through the CRI audit
	dir      string
	eng      *Engine
	reg      *prometheus.Registry
	updates  chan config.PodUpdate
	cancel   context.CancelFunc
	done     chan error
	cfg      Config
	events   *eventLog
	// imageFs is the capacity of the simulated image filesystem; its
	// available bytes are the capacity less the sizes of the images present.
	imageFs uint64
	// signals are the eviction signals Config.Signals reports (the
	// `signal` command); signalsErr fails the next measurement.
	sigMu      sync.Mutex
	signals    eviction.Observations
	signalsErr int
	// added is when each pod (by name) was first added, and probesShown
	// how many recorded calls probe-times went through (probe_times_test.go).
	added       map[string]time.Time
	probesShown int
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
	// The runtime is served in memory, inside the test's bubble
	// (testing/synctest): settle waits until every goroutine of the engine,
	// of gRPC and of the runtime is blocked. Its endpoint still names a
	// socket in the test's directory, as errors show it.
	endpoint := "unix://" + filepath.Join(h.dir, sim.SocketName)
	h.srv = sim.New(sim.Options{Clock: h.clk, Images: []string{"busybox:latest"}}).ServeListener(h.listen(), endpoint)
	h.srv.Runtime.RecordCalls()
	rt, err := cri.Dial(context.Background(), endpoint, cri.WithDialer(h.dial))
	if err != nil {
		t.Fatal(err)
	}
	h.rt = rt
	// The audit's check runs after the cleanup below stopped the engine.
	h.audit = auditRuntime(t, endpoint, cri.WithDialer(h.dial), cri.WithInterceptors(waitReadyWhenAsked, nil))
	t.Cleanup(func() {
		h.stop()
		rt.Close()
		h.srv.Stop()
	})
	return h
}

// waitReady marks a context whose call waits until the connection is ready
// instead of failing while the runtime is unreachable.
type waitReady struct{}

// waitReadyWhenAsked makes a call whose context is marked with waitReady
// wait for the connection (grpc.WaitForReady): the runtime-up command's
// call blocks in the bubble, whose time then passes for gRPC's reconnect
// backoff. The engine's own calls fail fast, as on a real runtime.
func waitReadyWhenAsked(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if ctx.Value(waitReady{}) != nil {
		opts = append(opts, grpc.WaitForReady(true))
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// listen makes a new in-memory listener the clients dial from now on.
func (h *scriptHarness) listen() net.Listener {
	h.lisMu.Lock()
	defer h.lisMu.Unlock()
	h.lis = bufconn.Listen(1 << 20)
	return h.lis
}

// dial connects to the runtime's current listener (cri.WithDialer); once
// the runtime is stopped, it fails as a socket nobody listens on.
func (h *scriptHarness) dial(ctx context.Context, _ string) (net.Conn, error) {
	h.lisMu.Lock()
	l := h.lis
	h.lisMu.Unlock()
	return l.DialContext(ctx)
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
	cfg.Log = slog.New(h.events)
	told := cfg.Steps
	cfg.Steps = func(s Step) {
		coverStep(s)
		if told != nil {
			told(s)
		}
	}
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
	h.cfg.Steps = told // a restart with h.cfg counts each step once
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
		failEffects(h.t, h.eng) // effects_test.go
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

// settle waits until the engine, the gRPC connections and the simulated
// runtime have nothing left to do but wait: every goroutine of the test's
// bubble is blocked (synctest.Wait), on the fake clock (a slow call, a stop
// waiting for its timeout) or on its next input. The script shows that
// state.
func (h *scriptHarness) settle() {
	synctest.Wait()
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
