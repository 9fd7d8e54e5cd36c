package sim

import (
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
}

type behaviorRule struct {
	match Match
	b     Behavior
}

// callRule is the scripted behaviour of one CRI method.
type callRule struct {
	delay time.Duration
	fail  int
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

// Calls returns how many calls of a CRI method the runtime has received,
// failed ones included.
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
