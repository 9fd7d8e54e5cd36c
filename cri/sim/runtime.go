package sim

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Options configure a simulated runtime.
type Options struct {
	// Clock drives every time the runtime reports or waits for: timestamps,
	// scripted exits, stop timeouts and slow calls. nil = the real clock.
	// Give a k8s.io/utils/clock/testing.FakeClock for deterministic tests.
	Clock clock.WithDelayedExecution
	// Images are present from the start (references, e.g. "busybox:latest").
	Images []string
	// EventBuffer is how many events a GetContainerEvents subscriber may lag
	// behind before its stream is ended with ResourceExhausted (default 4096).
	EventBuffer int
	// Handlers and Features are what Status reports (containerd 2.x's
	// runtime handlers and features); none by default, as containerd 1.6.
	// With Features.SupplementalGroupsPolicy, ContainerStatus reports each
	// container's user (the uid, gid and groups its config asks for).
	Handlers []*runtimeapi.RuntimeHandler
	Features *runtimeapi.RuntimeFeatures
}

// RuntimeName and RuntimeVersion are what Version reports.
const (
	RuntimeName    = "speclet-sim"
	RuntimeVersion = "0.1.0"
)

// Runtime is an in-memory CRI runtime. It implements the CRI runtime and
// image services; Serve exposes it over gRPC. All methods are safe for
// concurrent use.
type Runtime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	clock       clock.WithDelayedExecution
	eventBuffer int
	handlers    []*runtimeapi.RuntimeHandler
	features    *runtimeapi.RuntimeFeatures

	mu         sync.Mutex
	sandboxes  map[string]*sandbox
	containers map[string]*container
	names      map[string]string // reserved sandbox and container names -> id
	images     map[string]*image // by normalized ref and by id
	missing    map[string]bool
	behaviors  []behaviorRule
	rules      map[string]*callRule
	calls      map[string]int
	largest    map[string]int // List* method -> largest reply in bytes (LargestReply)
	subs       map[*subscriber]struct{}
	nextIP     uint32
	recording  bool
	log        []Call
	usage      map[[2]string]Usage // (pod, container) -> scripted ListContainerStats

	late []string // containers whose StartContainer timed out and runs later (StartLate)

	due     exitHeap       // scripted exits, soonest first
	pending sync.WaitGroup // scripted exits fired by the clock and not yet applied
}

// dueExit is a scripted exit of c at time at (Unix ns).
type dueExit struct {
	at   int64
	c    *container
	code int32
}

// exitHeap is a min-heap of scripted exits by time.
type exitHeap []dueExit

func (h exitHeap) Len() int           { return len(h) }
func (h exitHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h exitHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *exitHeap) Push(x any)        { *h = append(*h, x.(dueExit)) }
func (h *exitHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = dueExit{}
	*h = old[:len(old)-1]
	return x
}

// lock takes r.mu and applies every scripted exit that is due on the clock,
// at its due time, so that no call sees a container running past its exit.
func (r *Runtime) lock() {
	r.mu.Lock()
	if len(r.due) == 0 {
		return
	}
	now := r.now()
	for len(r.due) > 0 && r.due[0].at <= now {
		d := heap.Pop(&r.due).(dueExit)
		if d.c.state == runtimeapi.ContainerState_CONTAINER_RUNNING && d.c.exitDue == d.at {
			r.exitAt(d.c, d.code, d.at)
		}
	}
}

var (
	_ runtimeapi.RuntimeServiceServer = (*Runtime)(nil)
	_ runtimeapi.ImageServiceServer   = (*Runtime)(nil)
)

// New returns an empty simulated runtime.
func New(o Options) *Runtime {
	r := &Runtime{
		clock:       o.Clock,
		eventBuffer: o.EventBuffer,
		handlers:    o.Handlers,
		features:    o.Features,
		sandboxes:   map[string]*sandbox{},
		containers:  map[string]*container{},
		names:       map[string]string{},
		images:      map[string]*image{},
		missing:     map[string]bool{},
		rules:       map[string]*callRule{},
		calls:       map[string]int{},
		subs:        map[*subscriber]struct{}{},
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.eventBuffer <= 0 {
		r.eventBuffer = 4096
	}
	for _, ref := range o.Images {
		r.addImage(normalizeRef(ref))
	}
	return r
}

// now returns the clock's time in Unix nanoseconds, as CRI reports times.
func (r *Runtime) now() int64 { return r.clock.Now().UnixNano() }

// newID returns a 64-hex-digit id, as containerd makes them.
func newID() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("sim: read random id: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

func notFound(kind, id string) error {
	return status.Errorf(codes.NotFound, "an error occurred when try to find %s %q: not found", kind, id)
}

// findSandbox resolves an id or a unique id prefix, as containerd does.
// r.mu is held.
func (r *Runtime) findSandbox(id string) (*sandbox, error) { return find(r.sandboxes, "sandbox", id) }

// findContainer resolves an id or a unique id prefix. r.mu is held.
func (r *Runtime) findContainer(id string) (*container, error) {
	return find(r.containers, "container", id)
}

// find resolves id in byID, exactly or as the prefix of a single id; kind
// names the object in the NotFound error.
func find[T any](byID map[string]T, kind, id string) (T, error) {
	if x, ok := byID[id]; ok {
		return x, nil
	}
	var found T
	n := 0
	if id != "" {
		for k, x := range byID {
			if strings.HasPrefix(k, id) {
				found = x
				n++
			}
		}
	}
	switch n {
	case 0:
		return found, notFound(kind, id)
	case 1:
		return found, nil
	default:
		var zero T
		return zero, status.Errorf(codes.NotFound, "%s id prefix %q is ambiguous", kind, id)
	}
}

func matchLabels(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Version reports the simulated runtime's name and version.
func (r *Runtime) Version(ctx context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           "0.1.0",
		RuntimeName:       RuntimeName,
		RuntimeVersion:    RuntimeVersion,
		RuntimeApiVersion: "v1",
	}, nil
}

// Status reports the runtime and the network ready, and Options'
// handlers and features.
func (r *Runtime) Status(ctx context.Context, _ *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}, RuntimeHandlers: r.handlers, Features: r.features}, nil
}

// Settle waits until every scripted exit whose time has come on the clock
// has been applied and its event queued. CRI calls never need it (each
// applies the exits that are due first); with a fake clock, call it after
// Step when waiting for the events of those exits:
//
//	clk.Step(10 * time.Second)
//	srv.Runtime.Settle() // the CONTAINER_STOPPED events are now queued
func (r *Runtime) Settle() { r.pending.Wait() }

// Len returns the number of sandboxes and containers the runtime holds.
func (r *Runtime) Len() (sandboxes, containers int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sandboxes), len(r.containers)
}

func errorf(format string, args ...any) error {
	return status.Error(codes.Unknown, fmt.Sprintf(format, args...))
}
