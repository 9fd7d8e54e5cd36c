package engine

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/inbox"
	"github.com/speclet/speclet/engine/pleg"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/worker"
)

// runPLEG relists every period and, when the runtime streams container
// events, forwards them as they come (the relist then slows to a safety net).
func (e *Engine) runPLEG(ctx context.Context, out chan<- *pleg.Event) {
	send := func(ev pleg.Event) {
		select {
		case out <- &ev:
		case <-ctx.Done():
		}
	}
	// kick asks for a relist now: the event stream broke, so what it would
	// have reported meanwhile is only in a list.
	kick := make(chan struct{}, 1)
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.streamEvents(ctx, send, kick) }()
	failing := false
	var last time.Time
	for {
		t0 := e.clock.Now()
		evs, err := e.pleg.Relist(ctx)
		if err == nil {
			var interval time.Duration
			if !last.IsZero() {
				interval = t0.Sub(last)
			}
			e.metrics.Relisted(e.clock.Since(t0), interval)
		}
		last = t0
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			failing = true
			e.log.Warn("relist failed; retrying every period", "err", err)
		case err == nil && failing:
			failing = false
			e.log.Info("relist works again")
		}
		for _, ev := range evs {
			send(ev)
		}
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-e.clock.After(e.pleg.Period()):
		}
	}
}

// streamGrace is how long an opened event stream must stay up before the
// PLEG counts it as streaming: a runtime without the stream (containerd 1.6)
// answers Unimplemented at once, and one that has it (containerd 2.x) sends
// nothing, not even headers, until a container changes, so an idle node
// would otherwise relist every second forever.
const streamGrace = time.Second

// streamEvents consumes GetContainerEvents while the runtime offers it and
// re-opens the stream after a break; a runtime without it (containerd 1.6)
// leaves the relist at its 1 s period. A stream counts as up (the relist
// slows to its evented period) once it has stayed open for streamGrace or
// delivered an event; when it ends, the relist returns to 1 s and runs at
// once (kick), as kubelet's evented PLEG falls back to relisting.
func (e *Engine) streamEvents(ctx context.Context, send func(pleg.Event), kick chan<- struct{}) {
	delay := time.Second
	for ctx.Err() == nil {
		ch := make(chan *runtimeapi.ContainerEventResponse, 256)
		done := make(chan error, 1)
		sctx, cancel := context.WithCancel(ctx)
		go func() { done <- e.rt.GetContainerEvents(sctx, ch) }()
		streaming := false
		up := func() {
			if !streaming {
				streaming = true
				e.pleg.SetEvented(true)
				e.metrics.EventStream(true)
			}
		}
		grace := e.clock.After(streamGrace)
	recv:
		for {
			select {
			case <-grace:
				grace = nil
				up()
			case ev := <-ch:
				up()
				if pe, ok := e.pleg.Observe(ev); ok {
					send(pe)
				}
			case err := <-done:
				cancel()
				e.pleg.SetEvented(false)
				if ctx.Err() != nil {
					return
				}
				e.metrics.EventStream(false)
				select {
				case kick <- struct{}{}:
				default:
				}
				if cri.IsUnimplemented(err) {
					e.log.Info("runtime has no container event stream; relisting every second")
					return
				}
				e.log.Warn("container event stream broke; relisting every second until it is back", "err", err)
				break recv
			case <-ctx.Done():
				cancel()
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-e.clock.After(delay):
		}
	}
}

// housekeeping runs every 2 s: it checks the runtime (pausing pod syncs with
// exponential backoff while it is down), purges finished workers, stops and
// removes runtime pods no source declares, and forgets old backoff entries.
func (e *Engine) housekeeping(ctx context.Context) {
	e.checkRuntime(ctx)
	e.crashBackoff.GC()
	e.pullBackoff.GC()
	e.purgeFinished()
	e.sweepStrays(ctx)
	e.cleanupOrphans()
	e.cleanupPodDirs()
}

// checkRuntime asks the runtime for its status (and the PLEG for its
// health) without blocking the loop.
// While it fails, the gate closes so pod workers hold their queued inputs,
// and the check retries with exponential backoff (100 ms doubling to 5 s)
// until the runtime answers again.
func (e *Engine) checkRuntime(ctx context.Context) {
	if !e.checking.CompareAndSwap(false, true) {
		return // a check or a recovery prober is running
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.checking.Store(false)
		err := e.runtimeStatus(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		e.runtimeErr.Store(&err)
		e.log.Error("container runtime is down; pausing pod syncs", "err", err)
		closed := make(chan struct{})
		e.gate.Store(&closed)
		delay := 100 * time.Millisecond
		for {
			select {
			case <-ctx.Done():
				return
			case <-e.clock.After(delay):
			}
			err := e.runtimeStatus(ctx)
			if err == nil {
				e.runtimeErr.Store(nil)
				close(closed)
				e.log.Info("container runtime is back; resuming pod syncs")
				return
			}
			e.runtimeErr.Store(&err)
			if delay *= 2; delay > runtimeBackoffMax {
				delay = runtimeBackoffMax
			}
		}
	}()
}

// runtimeStatus is the runtime's health as kubelet's sync loop sees it:
// the runtime answers Status and the PLEG relisted within 3 minutes. The
// reply's handlers and features are kept (kubelet's updateRuntimeUp).
func (e *Engine) runtimeStatus(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := e.rt.Status(ctx, false)
	if err != nil {
		return err
	}
	e.features.Store(podspec.RuntimeFeaturesOf(st))
	return e.pleg.Healthy()
}

// RuntimeFeatures is what the runtime's last Status reply said it
// supports; nil before the first (it then supports nothing).
func (e *Engine) RuntimeFeatures() *podspec.RuntimeFeatures { return e.features.Load() }

// purgeFinished forgets finished workers whose pod no source declares any
// more (SyncKnownPods). A UID that was killed and declared again gets a new
// worker: a terminated UID restarts only after this purge.
func (e *Engine) purgeFinished() {
	e.mu.Lock()
	var restart []*v1.Pod
	purged := map[types.UID][]string{} // UID -> its log directory, when known
	for uid, w := range e.workers {
		fin, pub := w.Finished()
		killed := w.KillPosted()
		if !fin {
			continue
		}
		name := string(uid)
		var logDirs []string // nil: found by listing Config.PodLogsDir
		if pub != nil {
			name = pub.Namespace + "/" + pub.Name
			if pub.UID == uid {
				logDirs = []string{podspec.LogDir(e.cfg.PodLogsDir, pub)}
			}
		}
		want := e.desired[uid]
		if want != nil && !killed {
			continue // a completed pod its source still lists: keep its status
		}
		delete(e.workers, uid)
		if pub != nil {
			e.metrics.ForgetProbes(pub.Name, pub.Namespace, string(uid))
		}
		e.forgetLocked(w)
		if want != nil {
			// Declared again with its UID: its logs stay, and its
			// containers count their restarts on from them.
			logDirs = []string{}
		}
		purged[uid] = logDirs
		if want == nil {
			e.log.Info("pod removed", "pod", name, "uid", uid)
		}
		w.Stop()
		if want != nil {
			restart = append(restart, want)
		}
	}
	n := len(e.workers)
	e.mu.Unlock()
	e.metrics.SetWorkers(n)
	// Nothing of a finished pod is left in the runtime: its directories go
	// before a pod declared again with its UID gets a new worker, so that
	// it starts with fresh emptyDirs (its log directory stays: kubelet
	// keeps the logs of a pod it still has, and counts restarts from them).
	dirs := e.podDirs()
	for uid, logDirs := range purged {
		dirs.Remove(uid, logDirs)
		e.releaseUserNamespace(uid)
	}
	for _, pod := range restart {
		if w := e.worker(pod.UID, true, pod); w != nil {
			w.Post(worker.Input{Kind: inbox.Config, Op: config.OpAdd, Pod: pod})
		}
	}
}
