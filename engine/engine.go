package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/eviction"
	"github.com/speclet/speclet/engine/imagegc"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/volume"
	"github.com/speclet/speclet/fsm"
)

// Defaults, read from the spec's durations (spec/pod.hcl, container.hcl):
// kubelet's values. Flags override the bases.
var (
	DefaultSyncFrequency        = fsm.PodDurationDefaults[fsm.PodDurationResync]
	DefaultCrashLoopBackOffBase = fsm.ContainerDurationDefaults[fsm.ContainerDurationCrashloop]
	CrashLoopBackOffMax         = fsm.ContainerDurationMax[fsm.ContainerDurationCrashloop]
	DefaultImagePullBackOffBase = fsm.ContainerDurationDefaults[fsm.ContainerDurationImagePullBackoff]
	ImagePullBackOffMax         = fsm.ContainerDurationMax[fsm.ContainerDurationImagePullBackoff]
)

// Engine timings that are not machine durations.
const (
	// backOffResetAfter: a container running this long without failing
	// loses its backoff.
	backOffResetAfter = 10 * time.Minute
	syncTickPeriod    = 1 * time.Second
	housekeepPeriod   = 2 * time.Second
	// sourcesSettle is how long after the first config update the engine
	// waits before it treats runtime pods no source declares as orphans.
	sourcesSettle = 2 * time.Second
	// runtimeBackoffMax caps the pause of pod syncs while the runtime is down.
	runtimeBackoffMax = 5 * time.Second
)

// Config configures an Engine. Zero values get kubelet's defaults.
type Config struct {
	Runtime              cri.Runtime
	NodeName             string
	RootDir              string
	SyncFrequency        time.Duration // default 1 min (jittered)
	CrashLoopBackOffBase time.Duration // default 10 s; max 300 s (CrashLoopBackOffMax)
	ImagePullBackOffBase time.Duration // default 10 s; max 300 s
	Clock                clock.WithTicker
	Registerer           prometheus.Registerer // nil = no metrics
	Log                  *slog.Logger          // nil = slog.Default()
	// ProbeResults carries thresholded probe outcomes from outside the
	// engine (tests); the engine's own probe workers feed it too.
	ProbeResults <-chan ProbeResult
	// ProbeJitter returns the delay of the first probe of a worker that
	// starts within one period of the engine's start (kubelet's jitter);
	// nil = uniform in [0, period).
	ProbeJitter func(period time.Duration) time.Duration
	// NodeIP is the node's address in pod statuses (hostIP, and podIP of
	// hostNetwork pods); "" = the first global unicast address of the
	// machine's interfaces, if any.
	NodeIP string
	// ClusterDNS are the cluster's DNS servers (--cluster-dns) and
	// ClusterDomain its domain (--cluster-domain): a ClusterFirst pod
	// resolves through them (engine/podspec.DNS); without servers such a
	// pod falls back to Default with a MissingClusterDNS warning.
	ClusterDNS    []string
	ClusterDomain string
	// ResolvConf is the node's resolver file that Default DNS pods copy
	// (--resolv-conf, /etc/resolv.conf there); "": none (nameserver
	// 127.0.0.1, as kubelet's --resolv-conf="").
	ResolvConf string
	// Services lists the cluster's services, for the service variables of
	// a container's environment (engine/podspec.ServiceEnv); an error
	// (services not read yet) is a CreateContainerConfigError of a pod
	// from the API server. nil (no API server): no service variables.
	Services func() ([]*v1.Service, error)
	// MaxPods is the node's pods capacity (kubelet's --max-pods): a pod
	// declared while that many admitted pods are active is refused
	// admission, Failed with reason OutOfpods, as kubelet's resource fit
	// refuses it. 0 = no limit. With the manifest limits of engine/config
	// it bounds what a CRI list call returns (MaxSandboxRecordBytes,
	// MaxContainerRecordBytes): a refused pod has no sandbox.
	MaxPods int
	// CrashLoopBackOffMax caps the CrashLoopBackOff delay; default the
	// spec's 300 s (kubelet's maxContainerRestartPeriod).
	CrashLoopBackOffMax time.Duration
	// ContainerGC is the policy for dead container instances.
	ContainerGC ContainerGCPolicy
	// ContainerGCPeriod is how often the node machine enforces the
	// node-wide limit ContainerGC.MaxContainers (kubelet's
	// ContainerGCPeriod: 1 min, the default).
	ContainerGCPeriod time.Duration
	// PodCgroups, when set, gives every pod a cgroup under its QoS class
	// (kubelet's --cgroups-per-qos), the CgroupParent of its sandbox;
	// nil leaves the cgroups to the runtime.
	PodCgroups PodCgroups
	// Allocatable is node allocatable (capacity - reserved - hard
	// eviction thresholds); a new pod whose requests do not fit beside the
	// admitted ones fails with OutOfcpu / OutOfmemory. nil: no check. It is
	// also what a downward API limits.* of a container without a limit
	// falls back to (nil: the machine's capacity).
	Allocatable v1.ResourceList
	// Node returns the node as the control plane knows it (its labels are
	// what required node affinity and nodeSelector match at admission):
	// the last one seen, or when fresh is set one read from the API server
	// now (admission asks so only for a pod that node affinity alone
	// refuses). nil, or a nil answer: the node as speclet registers it
	// (NodeName and the hostname, os and arch labels).
	Node func(fresh bool) *v1.Node
	// Sysctls is the node's sysctl allowlist (kubelet's safe sysctls and
	// --allowed-unsafe-sysctls); nil: the safe sysctls of this kernel.
	Sysctls *podspec.Sysctls
	// RuntimeClasses resolves a pod's runtimeClassName to the handler its
	// sandbox is created with; nil (no RuntimeClass API): a pod naming a
	// class is refused admission (RuntimeClassNotFound).
	RuntimeClasses RuntimeClasses
	// MemoryCapacity is the node's memory in bytes, which the
	// oom_score_adj of Burstable containers is computed against; 0 gives
	// every Burstable container 999.
	MemoryCapacity int64
	// VolumeAPI is where configMap, secret and serviceAccountToken volumes
	// come from (volume.Clientset over the --kubeconfig client); nil: such
	// volumes fail to mount with a FailedMount naming the missing API.
	VolumeAPI volume.API
	// Sources are the pod sources (config.SourceFile, SourceHTTP, SourceAPI)
	// that must each deliver their first snapshot before housekeeping treats
	// a runtime pod no source declares as an orphan and kills it. nil: the
	// first update of any source (and sourcesSettle) suffices.
	Sources []string
	// PublishedPod, when set, is called with each pod a worker published,
	// read-only: the API status manager's dirty set. It must not block.
	PublishedPod func(p *v1.Pod)
	// Events receives the pod events (nil: none are recorded).
	Events EventRecorder
	// NodeEvents receives the node's events (nil: none are recorded).
	NodeEvents NodeEventRecorder
	// ImageGC is kubelet's image GC policy (--image-gc-high-threshold,
	// --image-gc-low-threshold, --minimum-image-ttl-duration); zero
	// thresholds get 85 and 80.
	ImageGC imagegc.Policy
	// ImageGCPeriod is how often the node machine measures the image
	// filesystem (kubelet: 5 min, the default).
	ImageGCPeriod time.Duration
	// FsStat returns the capacity and the available bytes of the
	// filesystem mounted at path (the image filesystem ImageFsInfo names);
	// nil: statfs(2).
	FsStat func(path string) (capacity, available uint64, err error)
	// Eviction is the eviction manager's decision core (thresholds, grace
	// periods, pressure conditions); nil: no eviction, no pressure
	// admission.
	Eviction *eviction.Manager
	// EvictionPeriod is how often the signals are observed (kubelet: 10 s).
	EvictionPeriod time.Duration
	// Signals measures the eviction signals, imagefs on imageFs (the
	// mountpoint ImageFsInfo names, "" when unknown); nil: the host
	// (engine/nodestats) with nodefs on RootDir.
	Signals func(ctx context.Context, imageFs string) (eviction.Observations, error)
	// EvictionMaxPodGrace is --eviction-max-pod-grace-period: the grace
	// period of a soft eviction (negative: the pod's own).
	EvictionMaxPodGrace int64
}

// ContainerGCPolicy is kubelet's container GC policy for the dead
// instances of a container (--minimum-container-ttl-duration,
// --maximum-dead-containers-per-container).
type ContainerGCPolicy struct {
	// MinAge: an instance created less than this long ago is not removed.
	MinAge time.Duration
	// MaxPerContainer is how many dead instances of one container of a pod
	// stay in the runtime; the newest one always stays (its exit is the
	// container's lastState and its log is `logs --previous`), so 0 and 1
	// mean the same. Default 1.
	MaxPerContainer int
	// MaxContainers is the node-wide limit on dead instances
	// (--maximum-dead-containers), enforced with the per-container limit
	// by the node machine every ContainerGCPeriod (engine/containergc);
	// nil: no node-wide limit and no such pass (kubelet's -1). The newest
	// dead instance of each container still stays.
	MaxContainers *int
}

// PodCgroups owns the pod cgroups (engine/cgroups on a real node).
type PodCgroups interface {
	// Parent is the pod's cgroup, the CgroupParent of its sandbox.
	Parent(pod *v1.Pod) string
	// Ensure creates or updates the pod's cgroup with its limits.
	Ensure(pod *v1.Pod) error
	// Remove removes the pod's cgroup; no process of the pod is left.
	Remove(uid types.UID) error
	// Pods lists the UIDs whose cgroups exist.
	Pods() ([]types.UID, error)
}

// ProbeResult is one probe outcome for a container of a pod. One sent on
// Config.ProbeResults counts as a thresholded result: it is routed as is.
type ProbeResult struct {
	UID       types.UID
	Container string
	Kind      ProbeKind
	Success   bool
	Output    string // what the probe said (Unhealthy, ProbeWarning)
	gen       uint64 // the worker that ran it; 0: thresholded already
}

// Engine runs pods: one worker per pod UID drives the generated pod and
// container machines and turns their actions into CRI calls.
type Engine struct {
	volumes *volume.Manager // sets up and tears down pod volumes
	cfg     Config
	rt      cri.Runtime
	clock   clock.WithTicker
	log     *slog.Logger
	metrics *metrics

	// allocatable is what a resourceFieldRef limit falls back to
	// (podAllocatable).
	allocatable v1.ResourceList

	crashBackoff *backoff
	pullBackoff  *backoff
	pleg         *pleg

	// mu guards the worker table and static name ownership; it is never held
	// across a CRI call.
	mu       sync.RWMutex
	workers  map[types.UID]*podWorker
	names    map[string][]types.UID // static full name -> the UIDs holding it (first) and waiting for it, FIFO
	adopted  map[types.UID]*adoptedPod
	strays   map[types.UID]int         // UIDs in the runtime nobody owns -> consecutive housekeeping passes (strays.go)
	desired  map[types.UID]*v1.Pod     // the pods the sources declare now, newest spec
	gone     map[types.UID]goneHistory // the debug history of purged pods, for a while
	firstUpd time.Time                 // when the first config update arrived (zero: none yet)
	spoke    map[string]bool           // the sources that delivered their first snapshot

	// busy counts inputs queued or in progress anywhere in the engine; tests
	// wait for it to reach zero to see a settled state.
	busy atomic.Int64
	// progress counts machine transitions and inputs posted; tests use it
	// to tell a busy engine from one blocked on a fake clock.
	progress atomic.Int64

	// recovered is set once the state was rebuilt from the runtime;
	// until then recoverErr holds the last failure and Healthz fails.
	recovered  atomic.Bool
	recoverErr atomic.Pointer[error]
	runCtx     context.Context
	startedAt  time.Time // when Run began: probe workers starting within a period of it are jittered
	wg         sync.WaitGroup
	runtimeErr atomic.Pointer[error] // last runtime health error, nil when healthy
	checking   atomic.Bool           // a runtime check runs
	sweeping   atomic.Bool           // strays are being listed (strays.go)
	// runtimeName prefixes container IDs in statuses ("containerd://<id>"),
	// from the runtime's Version; "cri" when it does not say.
	runtimeName string
	gate        atomic.Pointer[chan struct{}]
	// node owns the node machine (image GC), run by its own goroutine.
	node *nodeReclaim
}

// New checks cfg and returns an engine ready to Run.
func New(cfg Config) (*Engine, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("engine: Config.Runtime is required")
	}
	if cfg.RootDir == "" {
		return nil, errors.New("engine: Config.RootDir is required")
	}
	if cfg.SyncFrequency <= 0 {
		cfg.SyncFrequency = DefaultSyncFrequency
	}
	if cfg.CrashLoopBackOffBase <= 0 {
		cfg.CrashLoopBackOffBase = DefaultCrashLoopBackOffBase
	}
	if cfg.CrashLoopBackOffMax <= 0 {
		cfg.CrashLoopBackOffMax = CrashLoopBackOffMax
	}
	if cfg.ContainerGC.MaxPerContainer < 1 {
		cfg.ContainerGC.MaxPerContainer = 1
	}
	if m := cfg.ContainerGC.MaxContainers; m != nil && *m < 0 {
		cfg.ContainerGC.MaxContainers = nil
	}
	if cfg.Sysctls == nil {
		sc, err := podspec.NewSysctls(podspec.KernelRelease(), nil)
		if err != nil {
			return nil, fmt.Errorf("engine: sysctl allowlist: %w", err)
		}
		cfg.Sysctls = sc
	}
	if cfg.ImageGCPeriod <= 0 {
		cfg.ImageGCPeriod = DefaultImageGCPeriod
	}
	if cfg.ImageGC.High == 0 && cfg.ImageGC.Low == 0 {
		cfg.ImageGC.High, cfg.ImageGC.Low = 85, 80
	}
	if err := cfg.ImageGC.Check(); err != nil {
		return nil, fmt.Errorf("engine: image GC policy: %w", err)
	}
	if cfg.FsStat == nil {
		cfg.FsStat = Statfs
	}
	if cfg.ContainerGCPeriod <= 0 {
		cfg.ContainerGCPeriod = DefaultContainerGCPeriod
	}
	if cfg.EvictionPeriod <= 0 {
		cfg.EvictionPeriod = DefaultEvictionPeriod
	}
	if cfg.ImagePullBackOffBase <= 0 {
		cfg.ImagePullBackOffBase = DefaultImagePullBackOffBase
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.NodeIP == "" {
		cfg.NodeIP = nodeIP()
	}
	e := &Engine{
		cfg:          cfg,
		rt:           cfg.Runtime,
		clock:        cfg.Clock,
		log:          cfg.Log,
		crashBackoff: newBackoff(cfg.Clock, cfg.CrashLoopBackOffBase, cfg.CrashLoopBackOffMax, backOffResetAfter),
		pullBackoff:  newBackoff(cfg.Clock, cfg.ImagePullBackOffBase, ImagePullBackOffMax, backOffResetAfter),
		pleg:         newPLEG(cfg.Runtime, cfg.Clock),
		workers:      map[types.UID]*podWorker{},
		names:        map[string][]types.UID{},
		adopted:      map[types.UID]*adoptedPod{},
		desired:      map[types.UID]*v1.Pod{},
		gone:         map[types.UID]goneHistory{},
		runtimeName:  "cri",
		allocatable:  podAllocatable(cfg.Allocatable),
		volumes:      &volume.Manager{Root: cfg.RootDir, API: cfg.VolumeAPI, Node: nodeAllocatable(cfg.Allocatable), Now: cfg.Clock.Now},
	}
	m, err := newMetrics(cfg.Registerer, e)
	if err != nil {
		return nil, err
	}
	e.metrics = m
	if e.cfg.Signals == nil {
		e.cfg.Signals = e.defaultSignals
	}
	e.node = newNodeReclaim(e)
	e.rt = detachedRuntime{Runtime: cfg.Runtime, run: func() context.Context { return e.runCtx }}
	if err := m.registerHealth(cfg.Registerer, e); err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	e.gate.Store(&open)
	return e, nil
}

// Run drives the pods until ctx ends, then returns; it leaves pods running
// (they are adopted at the next start). Before the first update it rebuilds
// its state from the runtime (the labels speclet put on CRI objects).
func (e *Engine) Run(ctx context.Context, updates <-chan config.PodUpdate) error {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		e.wg.Wait()
	}()
	e.runCtx = ctx
	e.startedAt = e.clock.Now()
	// The runtime may not answer yet (containerd restarting): retry with
	// backoff; config updates wait in their channel meanwhile.
	for delay := time.Second; ; delay = min(2*delay, 10*time.Second) {
		err := e.recover(ctx)
		if err == nil {
			if v, err := e.rt.Version(ctx); err == nil && v.RuntimeName != "" {
				e.runtimeName = v.RuntimeName
			}
			e.recoverErr.Store(nil)
			e.recovered.Store(true)
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		e.recoverErr.Store(&err)
		e.log.Error("rebuild state from runtime failed; retrying", "err", err, "retry-in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-e.clock.After(delay):
		}
	}

	plegCh := make(chan plegEvent, 4096)
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.runPLEG(ctx, plegCh) }()
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.node.run(ctx) }()

	syncTick := e.clock.NewTicker(syncTickPeriod)
	defer syncTick.Stop()
	housekeeping := e.clock.NewTicker(housekeepPeriod)
	defer housekeeping.Stop()
	probes := e.cfg.ProbeResults

	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-updates:
			if !ok {
				updates = nil
				continue
			}
			e.busy.Add(1)
			e.handleUpdate(u)
			e.busy.Add(-1)
		case ev := <-plegCh:
			e.handlePLEG(ev)
			e.busy.Add(-1)
		case <-syncTick.C():
			e.busy.Add(1)
			e.syncDue()
			e.busy.Add(-1)
		case <-housekeeping.C():
			e.busy.Add(1)
			e.housekeeping(ctx)
			e.busy.Add(-1)
		case r, ok := <-probes:
			if !ok {
				probes = nil
				continue
			}
			e.handleProbe(r)
		}
	}
}

// handleUpdate hands each pod of u to its worker, creating workers for new
// UIDs. Only the newest pending update of a worker counts.
func (e *Engine) handleUpdate(u config.PodUpdate) {
	e.mu.Lock()
	if e.firstUpd.IsZero() {
		e.firstUpd = e.clock.Now()
	}
	if e.spoke == nil {
		e.spoke = map[string]bool{}
	}
	e.spoke[u.Source] = true
	declares := declaresPod(u.Op)
	for _, pod := range u.Pods {
		if pod == nil || pod.UID == "" {
			continue
		}
		switch {
		case declares && pod.DeletionTimestamp == nil:
			e.desired[pod.UID] = pod
		case declares, isKillOp(u.Op):
			// A pod marked for deletion is never declared again: the
			// updates of its object (its status, its grace period) until
			// it is deleted reach its worker only (kubelet's pod workers
			// never restart a UID that was terminated).
			delete(e.desired, pod.UID)
		}
	}
	e.mu.Unlock()
	for _, pod := range u.Pods {
		if pod == nil || pod.UID == "" {
			e.log.Warn("pod update without UID ignored", "op", u.Op.String(), "source", u.Source)
			continue
		}
		// kubelet's "SyncLoop ADD/UPDATE/REMOVE" lines.
		level := slog.LevelInfo
		if u.Op == config.OpReconcile {
			level = LevelVerbose
		}
		e.log.Log(context.Background(), level, "SyncLoop "+u.Op.String(), "pod", pod.Namespace+"/"+pod.Name, "uid", pod.UID, "source", u.Source)
		op, create := u.Op, declares
		if declares && pod.DeletionTimestamp != nil {
			// A worker is made for it only to stop what a previous run
			// left in the runtime, and is told to kill.
			e.mu.RLock()
			_, create = e.adopted[pod.UID]
			e.mu.RUnlock()
			if e.worker(pod.UID, false, nil) == nil {
				op = config.OpDelete
			}
		}
		w := e.worker(pod.UID, create, pod)
		if w == nil {
			continue
		}
		w.post(input{kind: inputConfig, op: op, pod: pod})
	}
}

// worker returns the worker of uid, creating it when create is set.
func (e *Engine) worker(uid types.UID, create bool, pod *v1.Pod) *podWorker {
	e.mu.RLock()
	w := e.workers[uid]
	e.mu.RUnlock()
	if w != nil || !create {
		return w
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if w = e.workers[uid]; w != nil {
		return w
	}
	ad := e.adopted[uid]
	delete(e.adopted, uid)
	w = newPodWorker(e, pod, ad)
	w.pod = pod
	if w.runtimeHandler, w.refusal = e.admitLocked(pod, ad != nil); w.refusal != nil {
		e.log.Warn("pod refused admission", "pod", pod.Namespace+"/"+pod.Name, "uid", uid, "reason", w.refusal.Reason, "message", w.refusal.Message)
	}
	if config.IsStatic(pod) {
		e.queueNameLocked(fullName(pod), uid)
	}
	e.workers[uid] = w
	e.metrics.setWorkers(len(e.workers))
	e.wg.Add(1)
	go func() { defer e.wg.Done(); w.run(e.runCtx) }()
	return w
}

// LevelVerbose is the log level of -v 2: what the sync loop receives (PLEG
// events, pod syncs) besides the operator's info lines.
const LevelVerbose = slog.LevelInfo - 2

func (e *Engine) handlePLEG(ev plegEvent) {
	if e.log.Enabled(context.Background(), LevelVerbose) {
		e.log.Log(context.Background(), LevelVerbose, "SyncLoop (PLEG)", "uid", ev.UID, "event", fmt.Sprint(ev.Type), "container", ev.Name, "container-id", ev.ContainerID)
	}
	if w := e.worker(ev.UID, false, nil); w != nil {
		w.post(input{kind: inputPLEG, pleg: ev})
	}
}

func (e *Engine) handleProbe(r ProbeResult) {
	if w := e.worker(r.UID, false, nil); w != nil {
		w.post(input{kind: inputProbe, probe: r})
	}
}

// syncDue posts a sync to every worker whose requeue time has come.
func (e *Engine) syncDue() {
	now := e.clock.Now()
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, w := range e.workers {
		if w.due(now) {
			w.post(input{kind: inputSync})
		}
	}
}

// jitter returns d plus up to 10% (kubelet's wait.Jitter(d, 0.1) is what it
// adds to its requeue delays).
func jitter(d time.Duration) time.Duration {
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}

// waitRuntime blocks while the runtime is marked down. Pod workers call it
// before each batch of work: their inputs stay queued meanwhile.
func (e *Engine) waitRuntime(ctx context.Context) error {
	ch := *e.gate.Load()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pods returns copies of the pods the sources declare with their current
// status. Like kubelet's pod manager, a pod leaves the list as soon as its
// source removes it, even while it still terminates.
func (e *Engine) Pods() []*v1.Pod {
	e.mu.RLock()
	ws := make([]*podWorker, 0, len(e.workers))
	for uid, w := range e.workers {
		if e.desired[uid] != nil {
			ws = append(ws, w)
		}
	}
	e.mu.RUnlock()
	out := make([]*v1.Pod, 0, len(ws))
	for _, w := range ws {
		if p := w.snapshot(); p != nil {
			out = append(out, p.DeepCopy())
		}
	}
	config.SortPods(out)
	return out
}

// Pod is the declared pod uid with its current status, as Pods lists it;
// nil when it is not declared (marked for deletion, gone, an orphan) or
// has published nothing yet.
func (e *Engine) Pod(uid types.UID) *v1.Pod {
	if w := e.declaredWorker(uid); w != nil {
		if p := w.snapshot(); p != nil {
			return p.DeepCopy()
		}
	}
	return nil
}

// Declared reports that Pod(uid) would return the pod: a source declares
// it and its worker published it.
func (e *Engine) Declared(uid types.UID) bool {
	w := e.declaredWorker(uid)
	return w != nil && w.snapshot() != nil
}

// declaredWorker is the worker of uid when a source declares the pod.
func (e *Engine) declaredWorker(uid types.UID) *podWorker {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.desired[uid] == nil {
		return nil
	}
	return e.workers[uid]
}

// sourcesReady reports whether every source of Config.Sources delivered its
// first snapshot and the first update is sourcesSettle old: only then may
// housekeeping kill pods no source declares. Called with e.mu held.
func (e *Engine) sourcesReady() bool {
	if e.firstUpd.IsZero() || e.clock.Since(e.firstUpd) < sourcesSettle {
		return false
	}
	for _, s := range e.cfg.Sources {
		if !e.spoke[s] {
			return false
		}
	}
	return true
}

// SourcesReady reports whether every source delivered its first snapshot
// (and sourcesSettle passed): what the engine's sources declare is then
// complete.
func (e *Engine) SourcesReady() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.sourcesReady()
}

// NodeIP is the node's address in pod statuses (Config.NodeIP or the one
// found on the machine).
func (e *Engine) NodeIP() string { return e.cfg.NodeIP }

// PodStopped reports whether nothing of pod uid runs: its pod machine
// reached terminated or finished (no container runs, the sandbox is
// stopped), or it has no worker (never started, or purged). final is the
// status the worker published once its pod machine had stopped (terminal
// phase, containers terminated); for a purged worker the one kept with
// its history (historyKeep, historyPods; its identity and status, no
// spec), else nil. While the
// machine has stopped but that status is not published yet, stopped is
// false. The API status manager writes final, then deletes a deleted
// pod's object, as kubelet's status manager does.
func (e *Engine) PodStopped(uid types.UID) (final *v1.Pod, stopped bool) {
	e.mu.RLock()
	w := e.workers[uid]
	var kept *v1.Pod
	if g, ok := e.gone[uid]; ok && g.final != nil {
		kept = g.final.DeepCopy()
	}
	e.mu.RUnlock()
	if w == nil {
		return kept, true // purged: its final status if kept (history.go)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !podStopped(w.podState) {
		return nil, false
	}
	if w.pub == nil {
		return nil, true
	}
	if !podStopped(w.pubState) {
		return nil, false
	}
	return w.pub.DeepCopy(), true
}

func podStopped(s fsm.PodState) bool {
	return s == fsm.PodStateTerminated || s == fsm.PodStateFinished
}

// Healthz returns nil once the state was rebuilt from the runtime, while
// the runtime answers and the PLEG relisted successfully within the last
// three minutes; otherwise an error naming each reason.
func (e *Engine) Healthz() error {
	if !e.recovered.Load() {
		if p := e.recoverErr.Load(); p != nil {
			return fmt.Errorf("not ready: rebuilding state from the runtime failed (retrying): %w", *p)
		}
		return errors.New("not ready: rebuilding state from the runtime has not completed")
	}
	var rtErr error
	if p := e.runtimeErr.Load(); p != nil && !errors.Is(*p, errPLEGUnhealthy) {
		rtErr = fmt.Errorf("container runtime is down: %w", *p)
	}
	return errors.Join(rtErr, e.pleg.Healthy())
}

// countRunning counts pods whose published phase is Running.
func (e *Engine) countRunning() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	n := 0
	for uid, w := range e.workers {
		if p := w.snapshot(); p != nil && e.desired[uid] != nil && p.Status.Phase == v1.PodRunning {
			n++
		}
	}
	return n
}

// nodeIP returns the first global unicast address of the machine's
// interfaces (IPv4 preferred), or "".
func nodeIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	var v6 string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || !n.IP.IsGlobalUnicast() {
			continue
		}
		if n.IP.To4() != nil {
			return n.IP.String()
		}
		if v6 == "" {
			v6 = n.IP.String()
		}
	}
	return v6
}

// ctx is the context of Run (background before Run): probe workers end
// with it.
func (e *Engine) ctx() context.Context {
	if e.runCtx == nil {
		return context.Background()
	}
	return e.runCtx
}

// probeJitter is the random delay of a first probe, at most period.
func (e *Engine) probeJitter(period time.Duration) time.Duration {
	if e.cfg.ProbeJitter != nil {
		return min(e.cfg.ProbeJitter(period), period)
	}
	return rand.N(period)
}
