// Package op is what a machine's action asks of the world outside the
// machines, as values: an Op is one operation (a CRI call with its
// request, or a step on the host such as making a directory) with the
// continuation that reads its result and returns the next Op, until one
// ends the action (Done).
//
// Every action of every machine is written so: the generated
// fsm.<Machine>Actions[op.Op] asks each for its first Op, and the Exec of
// each machine's owner (fsm.<Machine>Impl) hands it to Exec on the node's
// runtime. An action returns its first Op without doing anything, and each
// continuation only reads the result, updates its owner's fields and
// raises the machine's events: the decisions are pure, and a test drives
// them with Reply, feeding the results a runtime would give, without one.
// Exec is the one executor: it runs the operations in order on the
// action's context, so each CRI call keeps the action's tag (the CRI
// audit's scope, and the spec's `uncancellable` declarations that
// engine/detach honours), and a kill that cancels the context cancels the
// call in flight.
package op

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
)

// Op is one operation and what follows it, or the end of an action.
type Op struct {
	name string // the CRI method or the host step; "" once done
	cri  bool   // name is a CRI method
	req  any    // what the operation is asked, as Request shows it
	eff  effect // runs the operation and continues; nil once done
	err  error  // once done: the action's error
}

// effect runs an operation and hands its result to the continuation (exec),
// or hands it a result given by a test (reply).
type effect interface {
	exec(ctx context.Context, rt cri.Runtime) Op
	reply(name string, v any, err error) Op
}

// Done ends an action with err, the error its log line reports (nil when
// it succeeded). What the machine does next, its continuations raised.
func Done(err error) Op { return Op{err: err} }

// Done reports whether o ends the action.
func (o Op) Done() bool { return o.eff == nil }

// Err is the action's error once o is done.
func (o Op) Err() error { return o.err }

// Name is the CRI method o calls (CRI is true), or the name of its host
// step; "" once done.
func (o Op) Name() string { return o.name }

// CRI reports whether o is a CRI call.
func (o Op) CRI() bool { return o.cri }

// Request is what o asks: the CRI request message for a call (as
// runtimeapi defines it), or the host step's argument.
func (o Op) Request() any { return o.req }

// String names the operation for logs and test failures.
func (o Op) String() string {
	if o.Done() {
		return fmt.Sprintf("done(%v)", o.err)
	}
	return o.name
}

// Reply gives o the result v, err of its operation, as Exec does after
// running it, and returns the next Op. v has the type the operation's
// constructor's continuation takes (a nil v is its zero value; an
// operation whose only result is its error takes nil). It panics when o is
// done, or when v has another type: a test that feeds a wrong reply.
func (o Op) Reply(v any, err error) Op {
	if o.Done() {
		panic("op: reply to an action that is done")
	}
	return o.eff.reply(o.name, v, err)
}

// Exec runs o and each operation that follows it on ctx against rt, and
// returns the action's error. Nothing of o runs concurrently: the
// continuations run on the caller's goroutine, between the calls.
func Exec(ctx context.Context, rt cri.Runtime, o Op) error {
	for !o.Done() {
		o = o.eff.exec(ctx, rt)
	}
	return o.err
}

// as is v as the reply type T of the operation name.
func as[T any](name string, v any) T {
	if v == nil {
		var zero T
		return zero
	}
	t, ok := v.(T)
	if !ok {
		var zero T
		panic(fmt.Sprintf("op: %s replied %T, want %T", name, v, zero))
	}
	return t
}

// step is an operation whose result is a T: a CRI call (call) or a host
// step (host), and the continuation that reads the result.
type step[T any] struct {
	call func(context.Context, cri.Runtime) (T, error)
	host func(context.Context) (T, error)
	then func(T, error) Op
}

func (s *step[T]) exec(ctx context.Context, rt cri.Runtime) Op {
	if s.host != nil {
		return s.then(s.host(ctx))
	}
	return s.then(s.call(ctx, rt))
}

func (s *step[T]) reply(name string, v any, err error) Op { return s.then(as[T](name, v), err) }

// errStep is an operation whose only result is its error.
type errStep struct {
	call func(context.Context, cri.Runtime) error
	host func(context.Context) error
	then func(error) Op
}

func (s *errStep) exec(ctx context.Context, rt cri.Runtime) Op {
	if s.host != nil {
		return s.then(s.host(ctx))
	}
	return s.then(s.call(ctx, rt))
}

func (s *errStep) reply(name string, v any, err error) Op {
	if v != nil {
		panic(fmt.Sprintf("op: %s replied %T, want only an error", name, v))
	}
	return s.then(err)
}

// call makes the Op of CRI method name, whose reply is a T.
func call[T any](name string, req any, run func(context.Context, cri.Runtime) (T, error), then func(T, error) Op) Op {
	return Op{name: name, cri: true, req: req, eff: &step[T]{call: run, then: then}}
}

// errorOnly makes the Op of a CRI method name that returns only an error.
func errorOnly(name string, req any, run func(context.Context, cri.Runtime) error, then func(error) Op) Op {
	return Op{name: name, cri: true, req: req, eff: &errStep{call: run, then: then}}
}

// Host is a step on the host named name (a cgroup, a directory, a file the
// request is built from, a lifecycle hook run against the container): f
// runs it on the action's context, then reads its result. arg is what
// Request shows.
func Host[T any](name string, arg any, f func(context.Context) (T, error), then func(T, error) Op) Op {
	return Op{name: name, req: arg, eff: &step[T]{host: f, then: then}}
}

// Do is a host step whose only result is its error.
func Do(name string, arg any, f func(context.Context) error, then func(error) Op) Op {
	return Op{name: name, req: arg, eff: &errStep{host: f, then: then}}
}

// Then runs o to its end, then f with the error o ended with; f's Op
// follows. An action that must do something however its operations end
// (record how long it took, drop what it built for them) ends with it.
func Then(o Op, f func(error) Op) Op {
	if o.Done() {
		return f(o.err)
	}
	return Op{name: o.name, cri: o.cri, req: o.req, eff: &then{eff: o.eff, f: f}}
}

// then is an operation of Then: o's, whose next Op is wrapped again. Exec
// runs o's chain to its end at once (one allocation for the whole chain);
// a test's Reply steps through it.
type then struct {
	eff effect
	f   func(error) Op
}

func (t *then) exec(ctx context.Context, rt cri.Runtime) Op {
	o := t.eff.exec(ctx, rt)
	for !o.Done() {
		o = o.eff.exec(ctx, rt)
	}
	return t.f(o.err)
}

func (t *then) reply(name string, v any, err error) Op { return Then(t.eff.reply(name, v, err), t.f) }

// RunPodSandbox creates and starts a sandbox from cfg with the runtime
// handler; then reads the sandbox's ID.
func RunPodSandbox(cfg *runtimeapi.PodSandboxConfig, handler string, then func(id string, err error) Op) Op {
	return call("RunPodSandbox", &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler},
		func(ctx context.Context, rt cri.Runtime) (string, error) { return rt.RunPodSandbox(ctx, cfg, handler) }, then)
}

// PodSandboxStatus reads the status of sandbox id.
func PodSandboxStatus(id string, then func(*runtimeapi.PodSandboxStatus, error) Op) Op {
	return call("PodSandboxStatus", &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id},
		func(ctx context.Context, rt cri.Runtime) (*runtimeapi.PodSandboxStatus, error) {
			return rt.PodSandboxStatus(ctx, id)
		}, then)
}

// StopPodSandbox stops sandbox id.
func StopPodSandbox(id string, then func(error) Op) Op {
	return errorOnly("StopPodSandbox", &runtimeapi.StopPodSandboxRequest{PodSandboxId: id},
		func(ctx context.Context, rt cri.Runtime) error { return rt.StopPodSandbox(ctx, id) }, then)
}

// ImageStatus reads the image's status (nil when it is not present).
func ImageStatus(image *runtimeapi.ImageSpec, then func(*runtimeapi.Image, error) Op) Op {
	return call("ImageStatus", &runtimeapi.ImageStatusRequest{Image: image},
		func(ctx context.Context, rt cri.Runtime) (*runtimeapi.Image, error) {
			return rt.ImageStatus(ctx, image)
		}, then)
}

// CreateContainer creates a container from cfg in sandbox sandboxID, whose
// config is sandbox; then reads the container's ID.
func CreateContainer(sandboxID string, cfg *runtimeapi.ContainerConfig, sandbox *runtimeapi.PodSandboxConfig, then func(id string, err error) Op) Op {
	return call("CreateContainer", &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sandbox},
		func(ctx context.Context, rt cri.Runtime) (string, error) {
			return rt.CreateContainer(ctx, sandboxID, cfg, sandbox)
		}, then)
}

// StartContainer starts container id.
func StartContainer(id string, then func(error) Op) Op {
	return errorOnly("StartContainer", &runtimeapi.StartContainerRequest{ContainerId: id},
		func(ctx context.Context, rt cri.Runtime) error { return rt.StartContainer(ctx, id) }, then)
}

// StopContainer stops container id, killing it timeout seconds after
// SIGTERM. The call itself is given timeout seconds and 10 more, as
// kubelet's runtime client gives it.
func StopContainer(id string, timeout int64, then func(error) Op) Op {
	return errorOnly("StopContainer", &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: timeout},
		func(ctx context.Context, rt cri.Runtime) error {
			ctx, cancel := context.WithTimeout(ctx, time.Duration(timeout+10)*time.Second)
			defer cancel()
			return rt.StopContainer(ctx, id, timeout)
		}, then)
}

// ContainerStatus reads the status of container id.
func ContainerStatus(id string, then func(*runtimeapi.ContainerStatus, error) Op) Op {
	return call("ContainerStatus", &runtimeapi.ContainerStatusRequest{ContainerId: id},
		func(ctx context.Context, rt cri.Runtime) (*runtimeapi.ContainerStatus, error) {
			return rt.ContainerStatus(ctx, id)
		}, then)
}

// RemoveContainer removes container id.
func RemoveContainer(id string, then func(error) Op) Op {
	return errorOnly("RemoveContainer", &runtimeapi.RemoveContainerRequest{ContainerId: id},
		func(ctx context.Context, rt cri.Runtime) error { return rt.RemoveContainer(ctx, id) }, then)
}

// PullImage pulls image with auth (nil: none) for a pod whose sandbox
// config is sandbox; then reads the image's reference.
func PullImage(image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig, then func(ref string, err error) Op) Op {
	return call("PullImage", &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: sandbox},
		func(ctx context.Context, rt cri.Runtime) (string, error) {
			return rt.PullImage(ctx, image, auth, sandbox)
		}, then)
}

// ListContainers lists the runtime's containers that filter selects (nil:
// all).
func ListContainers(filter *runtimeapi.ContainerFilter, then func([]*runtimeapi.Container, error) Op) Op {
	return call("ListContainers", &runtimeapi.ListContainersRequest{Filter: filter},
		func(ctx context.Context, rt cri.Runtime) ([]*runtimeapi.Container, error) {
			return rt.ListContainers(ctx, filter)
		}, then)
}

// ListContainerStats reads the resource usage of the containers filter
// selects.
func ListContainerStats(filter *runtimeapi.ContainerStatsFilter, then func([]*runtimeapi.ContainerStats, error) Op) Op {
	return call("ListContainerStats", &runtimeapi.ListContainerStatsRequest{Filter: filter},
		func(ctx context.Context, rt cri.Runtime) ([]*runtimeapi.ContainerStats, error) {
			return rt.ListContainerStats(ctx, filter)
		}, then)
}

// Status reads the runtime's status, with its verbose info when verbose.
func Status(verbose bool, then func(*runtimeapi.StatusResponse, error) Op) Op {
	return call("Status", &runtimeapi.StatusRequest{Verbose: verbose},
		func(ctx context.Context, rt cri.Runtime) (*runtimeapi.StatusResponse, error) {
			return rt.Status(ctx, verbose)
		}, then)
}

// ListImages lists the runtime's images.
func ListImages(then func([]*runtimeapi.Image, error) Op) Op {
	return call("ListImages", &runtimeapi.ListImagesRequest{},
		func(ctx context.Context, rt cri.Runtime) ([]*runtimeapi.Image, error) { return rt.ListImages(ctx, nil) }, then)
}

// RemoveImage removes image.
func RemoveImage(image *runtimeapi.ImageSpec, then func(error) Op) Op {
	return errorOnly("RemoveImage", &runtimeapi.RemoveImageRequest{Image: image},
		func(ctx context.Context, rt cri.Runtime) error { return rt.RemoveImage(ctx, image) }, then)
}

// ImageFsInfo reads the usage of the filesystems the runtime keeps images
// on.
func ImageFsInfo(then func(*runtimeapi.ImageFsInfoResponse, error) Op) Op {
	return call("ImageFsInfo", &runtimeapi.ImageFsInfoRequest{},
		func(ctx context.Context, rt cri.Runtime) (*runtimeapi.ImageFsInfoResponse, error) {
			return rt.ImageFsInfo(ctx)
		}, then)
}

// RemovePodSandbox removes sandbox id and its containers.
func RemovePodSandbox(id string, then func(error) Op) Op {
	return errorOnly("RemovePodSandbox", &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id},
		func(ctx context.Context, rt cri.Runtime) error { return rt.RemovePodSandbox(ctx, id) }, then)
}

// Deliver delivers event to the machines named to (a pod's sandbox, its
// containers) with f, which fires them on the action's context: their own
// actions run inside it, as operations of their own. then reads the
// context's error once f returned (a kill cancelled the batch), else nil.
// Request shows "event to".
func Deliver(event, to string, f func(context.Context), then func(error) Op) Op {
	return Do("Deliver", event+" to "+to, func(ctx context.Context) error { f(ctx); return ctx.Err() }, then)
}
