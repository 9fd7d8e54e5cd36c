package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/eviction"
	"github.com/speclet/speclet/engine/fire"
	"github.com/speclet/speclet/engine/history"
	"github.com/speclet/speclet/engine/imagegc"
	"github.com/speclet/speclet/fsm"
)

// DefaultImageGCPeriod is kubelet's ImageGCPeriod.
const DefaultImageGCPeriod = 5 * time.Minute

// DefaultContainerGCPeriod is kubelet's ContainerGCPeriod.
const DefaultContainerGCPeriod = time.Minute

// nodeHistoryMax bounds the node machine's kept transitions.
const nodeHistoryMax = 200

// nodeStep is a step of the node machine as its observers see it
// (observe.go).
type nodeStep = fire.Step[fsm.NodeState, fsm.NodeEvent, fsm.NodeAction, fsm.NodeGuard, *nodeReclaim]

// nodeReclaim owns the node machine (spec/node.hcl): its goroutine (run,
// node_schedule.go) fires the timers of the machine's state when they are
// due and carries out the steps, one at a time, as a pod worker does for a
// pod's machines. Everything but the history and the published state is
// touched by that goroutine only.
type nodeReclaim struct {
	e       *Engine
	machine *fsm.NodeMachine
	steps   fire.Run[fsm.NodeState, fsm.NodeEvent, fsm.NodeAction, fsm.NodeGuard, *nodeReclaim] // the node machine in the fire loop
	gc      *imagegc.Manager

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

	// The schedule of each pass, by the duration that reads it, and the
	// timers of the machine's current state (node_schedule.go).
	sched  [len(fsm.NodeDurationDefaults)]schedule
	timers []timer

	hist  history.Log   // the node machine's last transitions
	mu    sync.Mutex    // guards state
	state fsm.NodeState // the machine's state, for readers on other goroutines
}

var _ fsm.NodeImpl = (*nodeReclaim)(nil)
var _ fsm.NodeDurations = (*nodeReclaim)(nil)

// stateName is the node machine's current state.
func (n *nodeReclaim) stateName() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state.String()
}

func newNodeReclaim(e *Engine) *nodeReclaim {
	n := &nodeReclaim{e: e, gc: imagegc.New(e.cfg.ImageGC), reclaimed: map[string]bool{}, hist: history.Log{Max: nodeHistoryMax}}
	n.machine = fsm.BindNodeMachine(fsm.NodeInitialState, n)
	n.steps = fire.NewRun(n, nodeObservers)
	return n
}

// report queues an event an action reports; fire delivers it after the
// action returned.
func (n *nodeReclaim) report(ev fsm.NodeEvent) { n.steps.Raise(ev) }

// fire delivers ev and the events the actions report, in order (engine/fire).
func (n *nodeReclaim) fire(ctx context.Context, ev fsm.NodeEvent) {
	fire.Fire(ctx, n.machine, &n.steps, ev)
}

// The node machine has no pod: its steps go to its own history and are
// logged without a pod.
func (n *nodeReclaim) engine() *Engine      { return n.e }
func (n *nodeReclaim) Now() time.Time       { return n.e.clock.Now() }
func (n *nodeReclaim) Logger() *slog.Logger { return n.e.log }
func (n *nodeReclaim) LogAttrs() []any      { return nil }
func (n *nodeReclaim) record() *history.Log { return &n.hist }
func (n *nodeReclaim) instance() string     { return "" }

// nodeEntered publishes the state the node machine entered to readers on
// other goroutines (speclet_machines).
func nodeEntered(_ context.Context, st *nodeStep) {
	if !st.Entered() {
		return
	}
	n := st.Owner
	n.mu.Lock()
	n.state = st.To
	n.mu.Unlock()
}

// NodeHistory returns the node machine's last transitions, oldest first.
func (e *Engine) NodeHistory() []Transition {
	_, h := e.node.hist.Snapshot(true)
	return h
}

// MeasureImageFs reads the image filesystem and the images, records which
// are in use, and plans the removals (engine/imagegc).
func (n *nodeReclaim) MeasureImageFs(ctx context.Context) error {
	err := n.measure(ctx)
	if err != nil {
		n.report(fsm.NodeEventMeasureFailed)
		n.gcDone(err)
		return err
	}
	if n.need == 0 {
		n.gcDone(nil)
		n.report(fsm.NodeEventBelowHigh)
	} else {
		n.report(fsm.NodeEventAboveHigh)
	}
	return nil
}

func (n *nodeReclaim) measure(ctx context.Context) error {
	e := n.e
	n.plan, n.need = nil, 0
	reclaim := n.reclaimAll
	n.reclaimAll, n.periodic = false, !reclaim
	info, err := e.rt.ImageFsInfo(ctx)
	if err != nil {
		return fmt.Errorf("image GC: %w", err)
	}
	fss := info.GetImageFilesystems()
	if len(fss) == 0 || fss[0].GetFsId().GetMountpoint() == "" {
		return errors.New("image GC: the runtime's ImageFsInfo names no image filesystem")
	}
	mount := fss[0].GetFsId().GetMountpoint()
	capacity, avail, err := e.cfg.FsStat(mount)
	if err != nil {
		return fmt.Errorf("image GC: image filesystem %s: %w", mount, err)
	}
	images, err := e.rt.ListImages(ctx, nil)
	if err != nil {
		return fmt.Errorf("image GC: %w", err)
	}
	ctrs, err := e.rt.ListContainers(ctx, nil)
	if err != nil {
		return fmt.Errorf("image GC: %w", err)
	}
	sandboxImage := n.sandboxImage(ctx)
	// An image is in use when a container of the runtime, running or not,
	// names it by id or reference (kubelet: every container of every pod),
	// or it is the runtime's sandbox image.
	named := map[string]bool{}
	for _, c := range ctrs {
		named[c.GetImageRef()] = true
		named[c.GetImage().GetImage()] = true
	}
	inUse := map[string]bool{}
	n.sizes, n.refs = map[string]uint64{}, map[string]string{}
	for _, img := range images {
		n.sizes[img.Id] = img.Size
		n.refs[img.Id] = img.Id
		if len(img.RepoTags) > 0 {
			n.refs[img.Id] = img.RepoTags[0]
		}
		used := named[img.Id]
		for _, r := range append(append([]string(nil), img.RepoTags...), img.RepoDigests...) {
			used = used || named[r] || (sandboxImage != "" && r == sandboxImage)
		}
		if used {
			inUse[img.Id] = true
		}
	}
	now := e.clock.Now()
	n.gc.Observe(now, images, inUse)
	used := capacity - min(avail, capacity)
	if reclaim {
		// Node-level reclaim for the eviction manager: every unused image.
		n.plan, n.need = n.gc.Unused(now)
		if n.need > 0 {
			e.log.Info("Eviction manager: node-level reclaim removes every unused image", "images", len(n.plan), "bytes", n.need)
		}
		return nil
	}
	n.plan, n.need = n.gc.Plan(now, imagegc.Usage{Used: used, Capacity: capacity})
	if n.need > 0 {
		e.log.Info("Image garbage collection: disk usage above the high threshold", "mountpoint", mount,
			"usage-percent", used*100/max(capacity, 1), "high-threshold", e.cfg.ImageGC.High, "bytes-to-free", n.need,
			"low-threshold", e.cfg.ImageGC.Low)
	}
	return nil
}

// sandboxImage is the runtime's sandbox (pause) image as its verbose
// status tells it (containerd: info.config.sandboxImage); "" when it does
// not say. containerd 1.6 does not mark it pinned, so it is kept by name.
func (n *nodeReclaim) sandboxImage(ctx context.Context) string {
	st, err := n.e.rt.Status(ctx, true)
	if err != nil {
		return ""
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
	}
	if json.Unmarshal([]byte(st.GetInfo()["config"]), &cfg) != nil {
		return ""
	}
	return cfg.SandboxImage
}

// gcDone notes how a periodic image GC pass ended: as kubelet, a failure
// right after a failed pass is recorded on the node as a Warning
// ImageGCFailed with the error.
func (n *nodeReclaim) gcDone(err error) {
	if !n.periodic {
		return
	}
	if err != nil && n.gcFailed {
		n.e.nodeEvent(eventWarning, "ImageGCFailed", "%s", err.Error())
	}
	n.gcFailed = err != nil
}

// RemoveUnusedImages removes the planned images in order until their sizes
// add up to what must be freed.
func (n *nodeReclaim) RemoveUnusedImages(ctx context.Context) error {
	e := n.e
	var freed uint64
	var errs []error
	for _, id := range n.plan {
		if freed >= n.need {
			break
		}
		e.log.Info("Removing image to free bytes", "imageID", id, "image", n.refs[id], "size", n.sizes[id])
		if err := e.rt.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: id}); err != nil {
			errs = append(errs, fmt.Errorf("remove image %s: %w", n.refs[id], err))
			continue
		}
		freed += n.sizes[id]
	}
	if freed < n.need {
		errs = append(errs, fmt.Errorf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", n.need, freed))
	}
	n.plan = nil
	if len(errs) > 0 {
		err := errors.Join(errs...)
		n.gcDone(err)
		n.report(fsm.NodeEventCollectFailed)
		return err
	}
	n.gcDone(nil)
	e.log.Info("Image garbage collection freed enough", "bytes-freed", freed)
	n.report(fsm.NodeEventCollected)
	return nil
}

// Statfs is FsStat on a real node: the filesystem's size and what an
// unprivileged user may still write (f_bavail, as cadvisor reports it).
func Statfs(path string) (capacity, available uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}
