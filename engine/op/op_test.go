package op

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
)

// runtime answers the calls of a test and records them.
type runtime struct {
	cri.Runtime // nil: a call the test does not expect panics
	calls       []string
	stopErr     error
}

func (r *runtime) RunPodSandbox(_ context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	r.calls = append(r.calls, "RunPodSandbox "+cfg.GetMetadata().GetName()+" "+handler)
	return "sb-1", nil
}

func (r *runtime) PodSandboxStatus(_ context.Context, id string) (*runtimeapi.PodSandboxStatus, error) {
	r.calls = append(r.calls, "PodSandboxStatus "+id)
	return &runtimeapi.PodSandboxStatus{Id: id, State: runtimeapi.PodSandboxState_SANDBOX_READY}, nil
}

func (r *runtime) StopPodSandbox(_ context.Context, id string) error {
	r.calls = append(r.calls, "StopPodSandbox "+id)
	return r.stopErr
}

// chain is a small action: a host step, a sandbox run, its status, then a
// stop; each continuation writes what it read to seen.
func chain(seen *[]string) Op {
	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web"}}
	return Host("Prepare", "arg", func(context.Context) (int, error) { return 7, nil }, func(n int, err error) Op {
		*seen = append(*seen, fmt.Sprintf("prepare %d %v", n, err))
		if err != nil {
			return Done(err)
		}
		return RunPodSandbox(cfg, "runc", func(id string, err error) Op {
			*seen = append(*seen, fmt.Sprintf("run %s %v", id, err))
			return PodSandboxStatus(id, func(st *runtimeapi.PodSandboxStatus, err error) Op {
				*seen = append(*seen, fmt.Sprintf("status %q %v", st.GetId(), err))
				return StopPodSandbox(id, func(err error) Op {
					*seen = append(*seen, fmt.Sprintf("stop %v", err))
					return Done(err)
				})
			})
		})
	})
}

// TestExecRunsTheChainInOrder: Exec makes each call the chain asks for,
// in order, and hands each continuation its call's reply; the action's
// error is the last one's.
func TestExecRunsTheChainInOrder(t *testing.T) {
	stop := errors.New("stop refused")
	rt := &runtime{stopErr: stop}
	var seen []string
	err := Exec(context.Background(), rt, chain(&seen))
	if !errors.Is(err, stop) {
		t.Errorf("Exec = %v, want the last call's error %v", err, stop)
	}
	if got, want := strings.Join(rt.calls, "; "), "RunPodSandbox web runc; PodSandboxStatus sb-1; StopPodSandbox sb-1"; got != want {
		t.Errorf("calls %q, want %q", got, want)
	}
	if got, want := strings.Join(seen, "; "), "prepare 7 <nil>; run sb-1 <nil>; status \"sb-1\" <nil>; stop stop refused"; got != want {
		t.Errorf("continuations saw %q, want %q", got, want)
	}
}

// TestReplyDrivesTheChainWithoutARuntime: the same chain, fed by hand,
// shows each operation's name and request, and runs nothing.
func TestReplyDrivesTheChainWithoutARuntime(t *testing.T) {
	var seen []string
	o := chain(&seen)
	if o.Name() != "Prepare" || o.CRI() || o.Request() != "arg" {
		t.Fatalf("first op %s (cri %v, request %v), want the host step Prepare with arg", o, o.CRI(), o.Request())
	}
	o = o.Reply(3, nil)
	req, ok := o.Request().(*runtimeapi.RunPodSandboxRequest)
	if o.Name() != "RunPodSandbox" || !o.CRI() || !ok || req.RuntimeHandler != "runc" || req.Config.GetMetadata().GetName() != "web" {
		t.Fatalf("second op %s %v, want RunPodSandbox of web on runc", o, o.Request())
	}
	o = o.Reply("sb-9", nil)
	if r, ok := o.Request().(*runtimeapi.PodSandboxStatusRequest); !ok || r.PodSandboxId != "sb-9" {
		t.Fatalf("third op %s %v, want PodSandboxStatus of sb-9", o, o.Request())
	}
	o = o.Reply(nil, errors.New("gone")) // a nil reply is the zero value
	o = o.Reply(nil, nil)
	if !o.Done() || o.Err() != nil {
		t.Fatalf("op after the stop: %s, want done without error", o)
	}
	if got, want := strings.Join(seen, "; "), "prepare 3 <nil>; run sb-9 <nil>; status \"\" gone; stop <nil>"; got != want {
		t.Errorf("continuations saw %q, want %q", got, want)
	}
}

// TestHostFailureEndsTheChain: a host step's error reaches its
// continuation, which ends the action before any call.
func TestHostFailureEndsTheChain(t *testing.T) {
	var seen []string
	o := chain(&seen).Reply(0, errors.New("no cgroup"))
	if !o.Done() || o.Err() == nil || o.Err().Error() != "no cgroup" {
		t.Errorf("after a failed host step: %s, want done with its error", o)
	}
}

// TestWrongReplyPanics: a reply of another type than the operation's is a
// test's mistake, named in the panic.
func TestWrongReplyPanics(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "RunPodSandbox replied int, want string") {
			t.Errorf("panic %v, want one naming RunPodSandbox's reply type", r)
		}
	}()
	var seen []string
	chain(&seen).Reply(1, nil).Reply(42, nil)
}

// TestReplyToDonePanics: nothing follows the end of an action.
func TestReplyToDonePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Reply to a done op did not panic")
		}
	}()
	Done(nil).Reply(nil, nil)
}

// TestDeliverReportsACancelledBatch: a delivery's result is the context's
// error once the delivered machines returned: nil, or the kill's
// cancellation that cut them short.
func TestDeliverReportsACancelledBatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var delivered []string
	var results []error
	deliver := func(event string, kill bool) func(error) Op {
		return func(err error) Op {
			results = append(results, err)
			return Deliver(event, "containers", func(context.Context) {
				delivered = append(delivered, event)
				if kill {
					cancel()
				}
			}, func(err error) Op { results = append(results, err); return Done(err) })
		}
	}
	o := Deliver("update", "containers", func(context.Context) { delivered = append(delivered, "update") }, deliver("start", true))
	if o.Name() != "Deliver" || o.Request() != "update to containers" {
		t.Fatalf("op %s %v, want Deliver of update to containers", o, o.Request())
	}
	err := Exec(ctx, &runtime{}, o)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Exec = %v, want the kill's cancellation", err)
	}
	if got := fmt.Sprint(delivered, results); got != "[update start] [<nil> context canceled]" {
		t.Errorf("delivered and results %s, want [update start] [<nil> context canceled]", got)
	}
}

// TestThenFollowsTheEnd: Then's function runs once the chain ended, with
// its error, whether Exec runs it or a test replies; an Op already done
// goes to it at once.
func TestThenFollowsTheEnd(t *testing.T) {
	stop := errors.New("stop refused")
	var seen []string
	end := func(err error) Op {
		seen = append(seen, fmt.Sprintf("then %v", err))
		if err == nil {
			return Done(nil)
		}
		return Done(fmt.Errorf("wrapped: %w", err))
	}
	rt := &runtime{stopErr: stop}
	if err := Exec(context.Background(), rt, Then(chain(&seen), end)); !errors.Is(err, stop) || !strings.HasPrefix(err.Error(), "wrapped: ") {
		t.Errorf("Exec = %v, want then's error wrapping %v", err, stop)
	}
	if got, want := strings.Join(seen, "; "), "prepare 7 <nil>; run sb-1 <nil>; status \"sb-1\" <nil>; stop stop refused; then stop refused"; got != want {
		t.Errorf("Exec: saw %q, want %q", got, want)
	}
	seen = nil
	o := Then(chain(&seen), end)
	if o.Name() != "Prepare" || o.Request() != "arg" {
		t.Fatalf("first op %s %v, want chain's Prepare", o, o.Request())
	}
	o = o.Reply(0, errors.New("no cgroup"))
	if !o.Done() || o.Err().Error() != "wrapped: no cgroup" {
		t.Errorf("after a failed host step: %s, want then's end", o)
	}
	if got := Then(Done(nil), end); !got.Done() || got.Err() != nil || seen[len(seen)-1] != "then <nil>" {
		t.Errorf("Then(Done(nil)) = %s (saw %q), want then's end at once", got, seen)
	}
}

// BenchmarkExec runs the test's chain (a host step and three calls) against
// a runtime that answers at once: the executor's own cost per action.
func BenchmarkExec(b *testing.B) {
	rt := &runtime{}
	ctx := context.Background()
	var seen []string
	b.ReportAllocs()
	for b.Loop() {
		seen = seen[:0]
		rt.calls = rt.calls[:0]
		Exec(ctx, rt, chain(&seen))
	}
}
