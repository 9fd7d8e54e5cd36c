package sim

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
)

// Match selects containers at CreateContainer time. Empty fields match
// anything; a Match with every field empty matches every container.
type Match struct {
	Pod     string // the sandbox's metadata name
	Name    string // the container's metadata name
	Image   string // the image as given in the container config
	Command string // a substring of the command and args joined by spaces
}

func (m Match) matches(podName string, cfg *runtimeapi.ContainerConfig) bool {
	if m.Pod != "" && m.Pod != podName {
		return false
	}
	if m.Name != "" && m.Name != cfg.GetMetadata().GetName() {
		return false
	}
	if m.Image != "" && m.Image != cfg.GetImage().GetImage() {
		return false
	}
	if m.Command != "" {
		argv := append(append([]string{}, cfg.GetCommand()...), cfg.GetArgs()...)
		if !strings.Contains(strings.Join(argv, " "), m.Command) {
			return false
		}
	}
	return true
}

// Term is what a container's process does on the SIGTERM of StopContainer.
type Term int

const (
	// TermDies: the process has no handler and dies of the signal at once
	// (exit code 143, reason "Error"). The default.
	TermDies Term = iota
	// TermHandled: the process traps SIGTERM and exits at once with
	// Behavior.TermExitCode (reason "Completed" for 0).
	TermHandled
	// TermIgnored: the process ignores SIGTERM; StopContainer kills it when
	// its timeout elapses on the runtime's clock (exit code 137, "Error").
	TermIgnored
)

// Exit makes a started container exit on its own.
type Exit struct {
	After time.Duration // after this long on the runtime's clock; <= 0 exits during StartContainer
	Code  int32
}

// Behavior is what a simulated container's process does. The zero Behavior
// runs until stopped and dies of SIGTERM.
type Behavior struct {
	Exit         *Exit // nil: run until stopped
	Term         Term
	TermExitCode int32 // exit code under TermHandled
	// StartError, when set, makes StartContainer fail with this message, as
	// when the executable does not exist: the container is left EXITED with
	// exit code 128 and reason "StartError".
	StartError string
	// Exec scripts ExecSync: the first reply whose Command matches answers.
	// A command no reply matches exits 0 at once with no output.
	Exec []ExecReply
}

// ExecReply is the scripted outcome of an ExecSync in a running container.
type ExecReply struct {
	Command        string // a substring of the command joined by spaces; "" matches any
	Stdout, Stderr string
	ExitCode       int32
	// Delay is how long the command runs on the runtime's clock. When the
	// request's timeout is shorter, ExecSync fails with DeadlineExceeded
	// once that timeout has passed.
	Delay time.Duration
}

func (b *Behavior) execReply(cmd []string) ExecReply {
	joined := strings.Join(cmd, " ")
	for _, e := range b.Exec {
		if strings.Contains(joined, e.Command) {
			return e
		}
	}
	return ExecReply{}
}

// Call is one recorded container call (see RecordCalls).
type Call struct {
	Method    string
	Pod       string // the sandbox's metadata name
	Container string // the container's metadata name
	Timeout   int64  // StopContainer's and ExecSync's timeout in seconds
	Cmd       []string
	At        time.Time // when the call arrived, on the runtime's clock
}

// RecordCalls makes the runtime record, in order of arrival, every later
// StartContainer, StopContainer and ExecSync call that finds its container
// (for tests that assert the order of calls and their timeouts).
func (r *Runtime) RecordCalls() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recording = true
}

// CallLog returns the calls recorded since RecordCalls.
func (r *Runtime) CallLog() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.log...)
}

// record notes a call on c when recording. r.mu is held.
func (r *Runtime) record(method string, c *container, timeout int64, cmd []string) {
	if !r.recording {
		return
	}
	r.log = append(r.log, Call{Method: method, Pod: c.sandbox.meta.GetName(), Container: c.meta.GetName(), Timeout: timeout, Cmd: cmd, At: r.clock.Now()})
}

type behaviorRule struct {
	match Match
	b     Behavior
}

// callRule is the scripted behaviour of one CRI method.
type callRule struct {
	delay time.Duration
	fail  int
	lose  int // replies to lose after the call did its work (LoseReply)
	late  int // StartContainer calls that time out and start later (StartLate)
	code  codes.Code
	msg   string
}

// OnContainer makes containers created from now on that match m behave as
// b. When several rules match, the one added last wins.
func (r *Runtime) OnContainer(m Match, b Behavior) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.behaviors = append(r.behaviors, behaviorRule{match: m, b: b})
}

// SetExec makes ExecSync of commands matching reply.Command answer reply in
// the containers m matches, running ones included, and in those created
// later (a probe that starts failing mid-test).
func (r *Runtime) SetExec(m Match, reply ExecReply) {
	r.mu.Lock()
	defer r.mu.Unlock()
	with := func(b *Behavior) *Behavior {
		nb := *b
		nb.Exec = append([]ExecReply{reply}, b.Exec...)
		return &nb
	}
	for _, c := range r.containers {
		if m.matches(c.sandbox.meta.GetName(), &runtimeapi.ContainerConfig{Metadata: c.meta, Image: c.image}) {
			c.b = with(c.b)
		}
	}
	for i := range r.behaviors {
		if r.behaviors[i].match == m {
			r.behaviors[i].b = *with(&r.behaviors[i].b)
		}
	}
}

// behaviorFor returns the behaviour of a new container. r.mu is held.
func (r *Runtime) behaviorFor(podName string, cfg *runtimeapi.ContainerConfig) *Behavior {
	for i := len(r.behaviors) - 1; i >= 0; i-- {
		if r.behaviors[i].match.matches(podName, cfg) {
			return &r.behaviors[i].b
		}
	}
	return &defaultBehavior
}

var defaultBehavior Behavior

// MissingImage makes PullImage of ref fail as a registry without that
// reference does (gRPC NotFound, containerd's "failed to resolve reference
// ...: not found" text). ref is matched after normalization (":latest" added
// when there is no tag or digest).
func (r *Runtime) MissingImage(ref string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.missing[normalizeRef(ref)] = true
}

// SlowCall makes every call of a CRI method ("StartContainer") take d on
// the runtime's clock before it runs; d = 0 clears it. A call whose context
// ends first fails with that context's code (DeadlineExceeded, Canceled).
func (r *Runtime) SlowCall(method string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rule(method).delay = d
}

// FailCall makes the next n calls of a CRI method fail with code and msg
// without doing anything.
func (r *Runtime) FailCall(method string, n int, code codes.Code, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.rule(method)
	c.fail, c.code, c.msg = n, code, msg
}

// LoseReply makes the next n calls of a CRI method do their work and then
// answer with an error, as when a reply is lost (a runtime restart cutting the
// connection, a client timeout): the caller believes the call failed although
// the runtime carried it out. The error is DeadlineExceeded, as a client
// whose per-call timeout ran out sees it.
func (r *Runtime) LoseReply(method string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rule(method).lose = n
}

// StartLate makes the next n StartContainer calls time out at the client
// (DeadlineExceeded) before the runtime acts: the container stays CREATED
// until FinishLateStarts carries the starts out, as a runtime does that
// queued the start behind slower work and finished it after the client
// gave up (and after the client's StopContainer of a created container,
// which does nothing).
func (r *Runtime) StartLate(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rule("StartContainer").late = n
}

// FinishLateStarts starts the containers whose StartContainer StartLate
// held back and that are still CREATED; with unknown set, the runtime then
// reports them in state UNKNOWN although their process runs, and sends no
// event (containerd after losing track of a task). It returns how many it
// started.
func (r *Runtime) FinishLateStarts(unknown bool) int {
	r.lock()
	defer r.mu.Unlock()
	n := 0
	for _, id := range r.late {
		c := r.containers[id]
		if c == nil || c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
			continue
		}
		r.run(c, unknown)
		if unknown {
			c.state = runtimeapi.ContainerState_CONTAINER_UNKNOWN
		}
		n++
	}
	r.late = nil
	return n
}

// loseReplies is the server's interceptor for LoseReply.
func (r *Runtime) loseReplies(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		return resp, err
	}
	method := cri.Method(info.FullMethod)
	size := 0
	if m, ok := resp.(proto.Message); ok && strings.HasPrefix(method, "List") {
		size = proto.Size(m)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if size > 0 {
		if r.largest == nil {
			r.largest = map[string]int{}
		}
		r.largest[method] = max(r.largest[method], size)
	}
	if c := r.rules[method]; c != nil && c.lose > 0 {
		c.lose--
		return nil, status.Errorf(codes.DeadlineExceeded, "sim: the reply of %s was lost: context deadline exceeded", method)
	}
	return resp, nil
}

// LargestReply returns the size in bytes of the largest reply of a List*
// method (ListContainers, ListPodSandbox, ...) the runtime has answered over
// gRPC since it started or since ResetLargestReplies, or 0. A reply over
// cri.MaxMsgSize never reaches the client (gRPC fails the call with
// ResourceExhausted) and is still counted here.
func (r *Runtime) LargestReply(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.largest[method]
}

// ResetLargestReplies forgets the sizes LargestReply reports.
func (r *Runtime) ResetLargestReplies() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.largest = nil
}

// Calls returns how many gRPC calls of a CRI method the runtime has
// received, failed ones and those of methods it does not implement
// included (the server's interceptor counts them).
func (r *Runtime) Calls(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[method]
}

func (r *Runtime) rule(method string) *callRule {
	c := r.rules[method]
	if c == nil {
		c = &callRule{}
		r.rules[method] = c
	}
	return c
}

// KillSandbox kills a READY sandbox's pause process behind the agent's back
// (kill -9, the OOM killer) and shows it as containerd does: the sandbox
// is NOTREADY in PodSandboxStatus and ListPodSandbox, and subscribers get a
// CONTAINER_STOPPED_EVENT whose ContainerId is the sandbox's id (containerd
// 1.7+; 1.6 sends no events). The sandbox is not removed and its name stays
// reserved.
//
// Its containers die with it only when they share the pause process's PID
// namespace (container PID namespace option POD, the CRI's zero value, with
// a sandbox that is not in the node's PID namespace): the kernel kills every
// process of a namespace whose init dies, and they exit with 137 ("Error"),
// each with its CONTAINER_STOPPED_EVENT after the sandbox's. A container
// in its own PID namespace (kubelet's default, NamespaceMode_CONTAINER)
// keeps RUNNING in a NOTREADY sandbox, as containerd 1.6 shows after the
// pause process of a host-network pod is killed; the agent must stop it.
//
// KillSandbox fails with NotFound for an unknown sandbox and with
// FailedPrecondition for one that is not READY.
func (r *Runtime) KillSandbox(id string) error {
	r.lock()
	defer r.mu.Unlock()
	s, err := r.findSandbox(id)
	if err != nil {
		return err
	}
	if s.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return status.Errorf(codes.FailedPrecondition, "sandbox %q is %s: its pause process is not running", s.id, s.state)
	}
	s.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	var dying []*container
	if s.nsOptions.GetPid() != runtimeapi.NamespaceMode_NODE {
		for _, c := range s.containers {
			if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING && c.pidMode == runtimeapi.NamespaceMode_POD {
				dying = append(dying, c)
			}
		}
	}
	r.emitSandboxStopped(s)
	for _, c := range dying {
		r.exit(c, 137)
	}
	return nil
}
