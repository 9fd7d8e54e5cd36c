package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/detach"
	"github.com/speclet/speclet/engine/metrics"
	"github.com/speclet/speclet/engine/names"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/pleg"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/reclaim"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/engine/userns"
	"github.com/speclet/speclet/engine/volume"
	"github.com/speclet/speclet/engine/worker"
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

// Engine runs pods: one worker per pod UID drives the generated pod and
// container machines and turns their actions into CRI calls.
type Engine struct {
	volumes *volume.Manager // sets up and tears down pod volumes
	cfg     Config
	rt      cri.Runtime
	clock   clock.WithTicker
	log     *slog.Logger
	metrics *metrics.Metrics
	sinks   observe.Sinks // the common observers' (engine/observe)

	crashBackoff *worker.Backoff
	pullBackoff  *worker.Backoff
	pleg         *pleg.PLEG

	// host is what the pod workers read of the engine (engine/worker);
	// each holds a pointer to it.
	host worker.Host

	// mu guards the worker table and static name ownership; it is never held
	// across a CRI call.
	mu       sync.RWMutex
	workers  map[types.UID]*worker.Worker
	names    names.Queues // static full names: the UID holding each and those waiting for it
	adopted  map[types.UID]*worker.Adopted
	strays   map[types.UID]int         // UIDs in the runtime nobody owns -> consecutive housekeeping passes (strays.go)
	desired  map[types.UID]*v1.Pod     // the pods the sources declare now, newest spec
	gone     map[types.UID]goneHistory // the debug history of purged pods, for a while
	goneSeq  []goneEntry               // gone's UIDs in the order they were forgotten (debug.go)
	goneN    uint64                    // how many pods were forgotten: the last goneEntry's seq
	firstUpd time.Time                 // when the first config update arrived (zero: none yet)
	spoke    map[string]bool           // the sources that delivered their first snapshot
	// cgroupSweep is when housekeeping lists the pod cgroups next
	// (cleanup.go); only the loop's goroutine reads and writes it.
	cgroupSweep time.Time

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
	gate       atomic.Pointer[chan struct{}]
	// features is what the runtime's last Status reply said it supports
	// (nil before the first; runtimeStatus keeps it).
	features atomic.Pointer[podspec.RuntimeFeatures]
	// node owns the node machine (image GC), run by its own goroutine.
	node *reclaim.Machine
	// userns holds the ID ranges of hostUsers: false pods (userns.go).
	userns *userns.Manager
}

// positiveOr sets *v to d unless *v is positive (a zero or negative
// duration in Config means the default).
func positiveOr(v *time.Duration, d time.Duration) {
	if *v <= 0 {
		*v = d
	}
}

// New checks cfg and returns an engine ready to Run.
func New(cfg Config) (*Engine, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("engine: Config.Runtime is required")
	}
	if cfg.RootDir == "" {
		return nil, errors.New("engine: Config.RootDir is required")
	}
	if cfg.PodLogsDir == "" {
		cfg.PodLogsDir = filepath.Join(cfg.RootDir, "logs")
	}
	if cfg.ContainerLogLinksDir == "" {
		cfg.ContainerLogLinksDir = filepath.Join(cfg.RootDir, "containers")
	}
	positiveOr(&cfg.SyncFrequency, DefaultSyncFrequency)
	positiveOr(&cfg.CrashLoopBackOffBase, DefaultCrashLoopBackOffBase)
	positiveOr(&cfg.CrashLoopBackOffMax, CrashLoopBackOffMax)
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
	positiveOr(&cfg.ImageGCPeriod, DefaultImageGCPeriod)
	if cfg.ImageGC.High == 0 && cfg.ImageGC.Low == 0 {
		cfg.ImageGC.High, cfg.ImageGC.Low = 85, 80
	}
	if err := cfg.ImageGC.Check(); err != nil {
		return nil, fmt.Errorf("engine: image GC policy: %w", err)
	}
	if cfg.FsStat == nil {
		cfg.FsStat = Statfs
	}
	positiveOr(&cfg.ContainerGCPeriod, DefaultContainerGCPeriod)
	positiveOr(&cfg.EvictionPeriod, DefaultEvictionPeriod)
	positiveOr(&cfg.ImagePullBackOffBase, DefaultImagePullBackOffBase)
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
		crashBackoff: worker.NewBackoff(cfg.Clock, cfg.CrashLoopBackOffBase, cfg.CrashLoopBackOffMax, backOffResetAfter),
		pullBackoff:  worker.NewBackoff(cfg.Clock, cfg.ImagePullBackOffBase, ImagePullBackOffMax, backOffResetAfter),
		pleg:         pleg.New(cfg.Runtime, cfg.Clock, runtimepods.Identify),
		volumes:      &volume.Manager{Root: cfg.RootDir, API: cfg.VolumeAPI, Node: nodeAllocatable(cfg.Allocatable), Now: cfg.Clock.Now},
		workers:      map[types.UID]*worker.Worker{},
		adopted:      map[types.UID]*worker.Adopted{},
		desired:      map[types.UID]*v1.Pod{},
		gone:         map[types.UID]goneHistory{},
	}
	m, err := metrics.New(cfg.Registerer, e.machines)
	if err != nil {
		return nil, err
	}
	if err := m.RegisterProbes(cfg.ProbeRegisterer); err != nil {
		return nil, err
	}
	e.metrics = m
	e.sinks = observe.Sinks{Metrics: m, Steps: cfg.Steps}
	if e.cfg.Signals == nil {
		e.cfg.Signals = e.defaultSignals
	}
	e.rt = detach.Runtime{Runtime: cfg.Runtime, Run: func() context.Context { return e.runCtx }}
	if err := e.newUserNamespaces(); err != nil {
		return nil, err
	}
	e.host = e.workerHost()
	e.host.UserNamespace = e.userNamespace
	e.node = newNodeMachine(e)
	if err := m.RegisterHealth(cfg.Registerer, e.recovered.Load, e.Healthz); err != nil {
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
				e.host.RuntimeName = v.RuntimeName
			}
			// What the runtime supports, before any pod is admitted.
			_ = e.runtimeStatus(ctx)
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

	// The channel carries pointers: 4096 events by value (80 bytes each)
	// were 320 KiB of buffer kept for the daemon's life, mostly idle.
	plegCh := make(chan *pleg.Event, 4096)
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.runPLEG(ctx, plegCh) }()
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.node.Run(ctx) }()

	syncTick := e.clock.NewTicker(syncTickPeriod)
	defer syncTick.Stop()
	housekeeping := e.clock.NewTicker(housekeepPeriod)
	defer housekeeping.Stop()

	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-updates:
			if !ok {
				updates = nil
				continue
			}
			e.handleUpdate(u)
		case ev := <-plegCh:
			e.handlePLEG(*ev)
		case <-syncTick.C():
			e.syncDue()
		case <-housekeeping.C():
			e.housekeeping(ctx)
		}
	}
}

// LevelVerbose is the log level of -v 2: what the sync loop receives (PLEG
// events, pod syncs) besides the operator's info lines.
const LevelVerbose = slog.LevelInfo - 2

// waitRuntime blocks while the runtime is marked down. Pod workers call it
// before each batch of work (worker.Engine): their inputs stay queued
// meanwhile.
func (e *Engine) waitRuntime(ctx context.Context) error {
	ch := *e.gate.Load()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ctx is the context of Run (background before Run): probe workers end
// with it.
func (e *Engine) ctx() context.Context {
	if e.runCtx == nil {
		return context.Background()
	}
	return e.runCtx
}

// firstProbeDelay is the random delay of a first probe, at most period,
// while the engine started less than period ago (kubelet's jitter of the
// probe workers it starts at once); 0 afterwards.
func (e *Engine) firstProbeDelay(period time.Duration) time.Duration {
	if e.clock.Now().Sub(e.startedAt) >= period {
		return 0
	}
	if e.cfg.ProbeJitter != nil {
		return min(e.cfg.ProbeJitter(period), period)
	}
	return rand.N(period)
}
