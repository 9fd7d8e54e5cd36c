// Package optest drives an action's operations (engine/op) in a test: it
// feeds each operation the reply a runtime or the host would give,
// checking that the operation is the one expected and that each CRI call
// is one the action's spec declares.
package optest

import (
	"fmt"
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/op"
)

// Step is one operation an action is expected to ask for, its name and
// what it is about (as About names it), and the result the test feeds it.
type Step struct {
	Op, About string
	V         any
	Err       error
}

// Drive feeds o the steps in order and returns the op that ends the
// action. It fails the test when an operation is not the step's, when a
// CRI call is not one of declared (the action's spec `cri` list, which
// the CRI audit holds the real calls to), or when the action asks for more
// than the steps.
func Drive(t testing.TB, o op.Op, declared []string, steps []Step) op.Op {
	t.Helper()
	for i, s := range steps {
		if o.Done() {
			t.Fatalf("step %d: the action ended (%v), want %s about %q", i, o.Err(), s.Op, s.About)
		}
		if o.CRI() && !slices.Contains(declared, o.Name()) {
			t.Fatalf("step %d: %s is not in the action's cri list %q", i, o, declared)
		}
		if got := About(o); o.Name() != s.Op || got != s.About {
			t.Fatalf("step %d: %s about %q, want %s about %q", i, o, got, s.Op, s.About)
		}
		o = o.Reply(s.V, s.Err)
	}
	if !o.Done() {
		t.Fatalf("after every step the action asks for %s about %q", o, About(o))
	}
	return o
}

// About is what operation o is about: the sandbox or container ID of a
// call about one (a stop's with its timeout, "c1 30s"), the sandbox and the
// container name of a create ("sb1 app"), the pod name of a sandbox run,
// the image of an image call (a pull's with its credential's user name),
// "verbose" for a verbose Status, the argument of a host step; "" for a
// call about nothing in particular (a list).
func About(o op.Op) string {
	if !o.CRI() {
		if o.Request() == nil {
			return ""
		}
		return fmt.Sprint(o.Request())
	}
	switch r := o.Request().(type) {
	case *runtimeapi.RunPodSandboxRequest:
		return r.Config.GetMetadata().GetName()
	case *runtimeapi.PodSandboxStatusRequest:
		return r.PodSandboxId
	case *runtimeapi.StopPodSandboxRequest:
		return r.PodSandboxId
	case *runtimeapi.RemovePodSandboxRequest:
		return r.PodSandboxId
	case *runtimeapi.CreateContainerRequest:
		return r.PodSandboxId + " " + r.Config.GetMetadata().GetName()
	case *runtimeapi.StartContainerRequest:
		return r.ContainerId
	case *runtimeapi.StopContainerRequest:
		return fmt.Sprintf("%s %ds", r.ContainerId, r.Timeout)
	case *runtimeapi.ContainerStatusRequest:
		return r.ContainerId
	case *runtimeapi.RemoveContainerRequest:
		return r.ContainerId
	case *runtimeapi.ImageStatusRequest:
		return r.Image.GetImage()
	case *runtimeapi.RemoveImageRequest:
		return r.Image.GetImage()
	case *runtimeapi.PullImageRequest:
		if u := r.Auth.GetUsername(); u != "" {
			return r.Image.GetImage() + " " + u
		}
		return r.Image.GetImage()
	case *runtimeapi.StatusRequest:
		if r.Verbose {
			return "verbose"
		}
	}
	return ""
}

// Action is an action of a machine owned by B that calls the runtime: the
// CRI methods its spec declares (its `cri` list), and its first operation.
type Action[B any] struct {
	CRI   []string
	First func(B) op.Op
}

// Run drives the action named name of actions, owned by b, with steps
// (Drive) and returns the op that ends it; it fails the test when actions
// has no such action.
func Run[B any](t testing.TB, actions map[string]Action[B], name string, b B, steps []Step) op.Op {
	t.Helper()
	a, ok := actions[name]
	if !ok {
		t.Fatalf("no action %q among the actions written as operations", name)
	}
	return Drive(t, a.First(b), a.CRI, steps)
}

// Reply is a test's own type of Step, with Step's fields in Step's order,
// so that its tables may list unkeyed rows (vet refuses unkeyed rows of a
// struct imported from another package).
type Reply interface {
	~struct {
		Op, About string
		V         any
		Err       error
	}
}

// RunReplies is Run with the steps given as the test's own Reply type.
func RunReplies[B any, R Reply](t testing.TB, actions map[string]Action[B], name string, b B, replies []R) op.Op {
	t.Helper()
	steps := make([]Step, len(replies))
	for i, r := range replies {
		steps[i] = Step(r)
	}
	return Run(t, actions, name, b, steps)
}

// Complete fails the test when an action of machine that declares CRI
// calls is not among actions, those its tests drive: declared is the
// machine's generated <Machine>ActionCRI, indexed by action, and name
// names action i as its spec does.
func Complete[B any](t testing.TB, machine string, declared [][]string, name func(i int) string, actions map[string]Action[B]) {
	t.Helper()
	for i, calls := range declared {
		if len(calls) > 0 && actions[name(i)].First == nil {
			t.Errorf("%s action %s calls %v but its tests do not drive it", machine, name(i), calls)
		}
	}
}
