// Package reclaim is the node machine's work (spec/node.hcl): kubelet's
// image garbage collector, its eviction manager and its node-wide container
// garbage collector, as the guards, actions and durations the generated
// fsm.NodeMachine calls. A Machine owns the machine itself (its fire loop,
// history and timers) and binds it to a Node; a Node reports the outcome of
// each action as the event the spec names, through Config.Report (the
// Machine's queue).
//
// Contracts:
//   - Only the Machine's goroutine (Run) calls a Node's methods; a Node keeps
//     no lock.
//   - Each pass runs on its own schedule (ImageGCPeriod, EvictionPeriod,
//     ContainerGCPeriod), first due one period after Start; the durations
//     next_image_gc, next_eviction and next_container_gc read them, and
//     Advance moves one on when its timer fired.
//   - Pods are evicted through Config.Pods, one at a time: no other goes
//     until the pod evicted last terminated (EvictedPodTerminating).
package reclaim

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/containergc"
	"github.com/speclet/speclet/engine/eviction"
	"github.com/speclet/speclet/engine/imagegc"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/fsm"
)

// kubelet's periods.
const (
	DefaultImageGCPeriod     = 5 * time.Minute
	DefaultContainerGCPeriod = time.Minute
	DefaultEvictionPeriod    = 10 * time.Second
)

// Pods is the engine's side of eviction.
type Pods interface {
	// Evictable lists the pods eviction may rank: admitted pods the
	// engine published, not completed or terminating, Running or Pending.
	Evictable() []*v1.Pod
	// Evict tells uid's worker to kill its pod with grace seconds and the
	// status message message (reason Evicted).
	Evict(uid types.UID, grace int64, message string)
	// Terminating reports whether uid has a worker whose pod machine is
	// neither terminated nor finished.
	Terminating(uid types.UID) bool
}

// Config is what a Node works with.
type Config struct {
	Runtime cri.Runtime
	Clock   clock.PassiveClock
	Log     *slog.Logger
	// Identify returns the pod UID and the container name a CRI object's
	// labels name; an empty UID: not the agent's.
	Identify func(labels map[string]string) (types.UID, string)
	// Report queues the event an action reports on the node machine.
	Report func(fsm.NodeEvent)
	// PodEvent records an event about a pod (Evicted); NodeEvent one about
	// the node (EvictionThresholdMet, ImageGCFailed). Either may be nil.
	PodEvent  func(pod *v1.Pod, eventType, reason, message string)
	NodeEvent func(eventType, reason, message string)

	// Policy is image GC and eviction as the node's flags set them.
	Policy
	// Pods is the engine's pods, which eviction ranks and evicts; PodGrace
	// a pod's own termination grace period in seconds.
	Pods     Pods
	PodGrace func(pod *v1.Pod) int64

	// Node-wide container GC: the policy, and how often it runs; 0: no
	// such pass (no --maximum-dead-containers).
	ContainerGC       containergc.Policy
	ContainerGCPeriod time.Duration
}

// Policy is what the node's flags say of image GC and eviction. The
// engine's Config embeds it (engine.NodePolicy), and its New fills in the
// defaults named here.
type Policy struct {
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
	// (engine/nodestats) with nodefs on the root directory.
	Signals func(ctx context.Context, imageFs string) (eviction.Observations, error)
	// EvictionMaxPodGrace is --eviction-max-pod-grace-period: the grace
	// period of a soft eviction (negative: the pod's own).
	EvictionMaxPodGrace int64
}

// Node is the node machine's implementation (fsm.NodeImpl, fsm.NodeDurations).
type Node struct {
	cfg Config
	gc  *imagegc.Manager

	// Eviction: the last decision, the disk signals node-level reclaim was
	// tried for since they were last met, and whether the next
	// measure_image_fs plans every unused image (reclaim).
	decision   eviction.Decision
	reclaimed  map[string]bool
	reclaimAll bool
	// lastEvicted is the pod evict_pod evicted last; no other goes until
	// it terminated.
	lastEvicted types.UID

	// periodic: the image GC pass under way is the periodic one (not
	// eviction's node-level reclaim); gcFailed: the last periodic pass
	// failed (kubelet records ImageGCFailed on repeated failures only).
	periodic, gcFailed bool

	// What measure_image_fs found, for remove_unused_images.
	plan  []string
	need  uint64
	sizes map[string]uint64 // image id -> bytes
	refs  map[string]string // image id -> a reference, for logs

	// The schedule of each pass, by the duration that reads it.
	sched [len(fsm.NodeDurationDefaults)]schedule
}

var _ fsm.NodeGuards = (*Node)(nil)
var _ fsm.NodeActions[op.Op] = (*Node)(nil)
var _ fsm.NodeDurations = (*Node)(nil)

// New returns the node machine's implementation over cfg.
func New(cfg Config) *Node {
	return &Node{cfg: cfg, gc: imagegc.New(cfg.ImageGC), reclaimed: map[string]bool{}}
}

func (n *Node) report(ev fsm.NodeEvent) { n.cfg.Report(ev) }

func (n *Node) nodeEvent(eventType, reason, message string) {
	if f := n.cfg.NodeEvent; f != nil {
		f(eventType, reason, message)
	}
}

// schedule is when a pass of the node machine is next due; every is its
// period, 0 when the pass is off.
type schedule struct {
	every time.Duration
	next  time.Time
}

// until is the time from now until the schedule's next instant, never
// below 0; negative when the pass is off (no timer).
func (s schedule) until(now time.Time) time.Duration {
	if s.every <= 0 {
		return -1
	}
	return max(s.next.Sub(now), 0)
}

// Start sets each pass's schedule: image GC every ImageGCPeriod, eviction
// every EvictionPeriod with an eviction manager, container GC every
// ContainerGCPeriod when it is on; each first due one period after start.
func (n *Node) Start(start time.Time) {
	every := func(d time.Duration, on bool) schedule {
		if !on || d <= 0 {
			return schedule{}
		}
		return schedule{every: d, next: start.Add(d)}
	}
	n.sched[fsm.NodeDurationNextImageGc] = every(n.cfg.ImageGCPeriod, true)
	n.sched[fsm.NodeDurationNextEviction] = every(n.cfg.EvictionPeriod, n.cfg.Eviction != nil)
	n.sched[fsm.NodeDurationNextContainerGc] = every(n.cfg.ContainerGCPeriod, true)
}

// Advance moves the schedule the duration d reads on by whole periods past
// now: its timer fired.
func (n *Node) Advance(d fsm.NodeDuration, now time.Time) {
	s := &n.sched[d]
	if s.every <= 0 {
		return
	}
	for !s.next.After(now) {
		s.next = s.next.Add(s.every)
	}
}

// NextImageGc is the duration next_image_gc.
func (n *Node) NextImageGc() time.Duration {
	return n.sched[fsm.NodeDurationNextImageGc].until(n.cfg.Clock.Now())
}

// NextEviction is the duration next_eviction: negative without an eviction
// manager.
func (n *Node) NextEviction() time.Duration {
	return n.sched[fsm.NodeDurationNextEviction].until(n.cfg.Clock.Now())
}

// NextContainerGc is the duration next_container_gc: negative without a
// node-wide dead container limit.
func (n *Node) NextContainerGc() time.Duration {
	return n.sched[fsm.NodeDurationNextContainerGc].until(n.cfg.Clock.Now())
}
