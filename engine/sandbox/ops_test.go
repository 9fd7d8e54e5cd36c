package sandbox

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/op/optest"
	"github.com/speclet/speclet/fsm"
)

// reply is one operation an action asks for (its name, and what it is
// about) and the result the test feeds it.
type reply struct {
	Op, About string
	V         any
	Err       error
}

// sandboxOps are the sandbox machine's actions that call the runtime, by
// spec name.
var sandboxOps = map[string]optest.Action[*Sandbox]{
	fsm.SandboxActionRunSandbox.String():   {CRI: fsm.SandboxActionCRI[fsm.SandboxActionRunSandbox], First: (*Sandbox).RunSandbox},
	fsm.SandboxActionCheckSandbox.String(): {CRI: fsm.SandboxActionCRI[fsm.SandboxActionCheckSandbox], First: (*Sandbox).CheckSandbox},
	fsm.SandboxActionStopSandbox.String():  {CRI: fsm.SandboxActionCRI[fsm.SandboxActionStopSandbox], First: (*Sandbox).StopSandbox},
}

// TestRuntimeActionsAreDriven: every action of the sandbox machine whose
// spec declares CRI calls has its operations driven by
// TestSandboxActionsAsOperations.
func TestRuntimeActionsAreDriven(t *testing.T) {
	optest.Complete(t, "sandbox", fsm.SandboxActionCRI[:], func(i int) string { return fsm.SandboxAction(i).String() }, sandboxOps)
}

// runAction drives the action of sandboxOps named name of s with the
// replies (optest.RunReplies) and returns the op that ends it.
func runAction(t *testing.T, name string, s *Sandbox, replies []reply) op.Op {
	t.Helper()
	return optest.RunReplies(t, sandboxOps, name, s, replies)
}

// sbWant is where the sandbox stands once its action is done.
type sbWant struct {
	raised []fsm.SandboxEvent
	id     string
	ids    []string
	podIP  string
	failed bool // the action's error (and Err) is set
}

// String shows w as the test compares it, events by name.
func (w sbWant) String() string {
	return fmt.Sprintf("raised %v, id %q, ids %q, pod IP %q, failed %v", w.raised, w.id, w.ids, w.podIP, w.failed)
}

const reservedID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

var (
	errNotFound = &cri.Error{Op: "PodSandboxStatus", Class: cri.ClassNotFound, Err: errors.New("not found")}
	errReserved = fmt.Errorf(`failed to reserve sandbox name "web_default_u_0": name "web_default_u_0" is reserved for %q`, reservedID)
	sbConfig    = &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Attempt: 0}, LogDirectory: "/logs/web"}
)

func sbStatus(state runtimeapi.PodSandboxState, ip string) *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{State: state, Network: &runtimeapi.PodSandboxNetworkStatus{Ip: ip}}
}

const (
	ready    = runtimeapi.PodSandboxState_SANDBOX_READY
	notReady = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
)

// TestSandboxActionsAsOperations drives the sandbox machine's actions
// through the operations they return, fed the runtime's replies by hand:
// the decisions of run_sandbox, check_sandbox and stop_sandbox, without a
// runtime.
func TestSandboxActionsAsOperations(t *testing.T) {
	create := []reply{{"SandboxConfig", "0", sbConfig, nil}, {"MakeLogDirectory", "/logs/web", nil, nil}}
	steps := func(rs ...reply) []reply { return append(slices.Clone(create), rs...) }
	for _, tc := range []struct {
		name    string
		action  string // the spec name of an action of sandboxOps
		host    bool   // hostNetwork
		ids     []string
		replies []reply
		want    sbWant
	}{
		{name: "run: a new sandbox is read back with its IP", action: "run_sandbox",
			replies: steps(reply{"RunPodSandbox", "web", "sb-1", nil}, reply{"PodSandboxStatus", "sb-1", sbStatus(ready, "10.1.0.7"), nil}),
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventReady}, id: "sb-1", ids: []string{"sb-1"}, podIP: "10.1.0.7"}},
		{name: "run: hostNetwork needs no IP", action: "run_sandbox", host: true,
			replies: steps(reply{"RunPodSandbox", "web", "sb-1", nil}),
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventReady}, id: "sb-1", ids: []string{"sb-1"}}},
		{name: "run: the config cannot be built", action: "run_sandbox",
			replies: []reply{{"SandboxConfig", "0", nil, errors.New("bad dnsConfig")}},
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventCreateFailed}, failed: true}},
		{name: "run: no log directory, no call", action: "run_sandbox",
			replies: []reply{create[0], {"MakeLogDirectory", "/logs/web", nil, errors.New("read-only")}},
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventCreateFailed}, failed: true}},
		{name: "run: RunPodSandbox fails", action: "run_sandbox",
			replies: steps(reply{"RunPodSandbox", "web", nil, errors.New("no network")}),
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventCreateFailed}, failed: true}},
		{name: "run: gone right after its creation", action: "run_sandbox",
			replies: steps(reply{"RunPodSandbox", "web", "sb-1", nil}, reply{"PodSandboxStatus", "sb-1", nil, errNotFound}),
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventStatusFailed}, id: "sb-1", ids: []string{"sb-1"}, failed: true}},
		{name: "run: not ready right after its creation", action: "run_sandbox",
			replies: steps(reply{"RunPodSandbox", "web", "sb-1", nil}, reply{"PodSandboxStatus", "sb-1", sbStatus(notReady, ""), nil}),
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventStatusFailed}, id: "sb-1", ids: []string{"sb-1"}, failed: true}},
		{name: "run: the name is reserved for a ready sandbox, adopted", action: "run_sandbox",
			replies: steps(reply{"RunPodSandbox", "web", nil, errReserved}, reply{"PodSandboxStatus", reservedID, sbStatus(ready, "10.1.0.8"), nil}),
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventReady}, id: reservedID, ids: []string{reservedID}, podIP: "10.1.0.8"}},
		{name: "run: the name is reserved for a sandbox not ready, kept for removal", action: "run_sandbox",
			replies: steps(reply{"RunPodSandbox", "web", nil, errReserved}, reply{"PodSandboxStatus", reservedID, sbStatus(notReady, ""), nil}),
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventCreateFailed}, ids: []string{reservedID}, failed: true}},
		{name: "run: the name is reserved, the sandbox not described yet", action: "run_sandbox",
			replies: steps(reply{"RunPodSandbox", "web", nil, errReserved}, reply{"PodSandboxStatus", reservedID, nil, errNotFound}),
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventCreateFailed}, failed: true}},
		{name: "check: ready", action: "check_sandbox", ids: []string{"sb-1"},
			replies: []reply{{"PodSandboxStatus", "sb-1", sbStatus(ready, "10.1.0.7"), nil}},
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventReady}, id: "sb-1", ids: []string{"sb-1"}, podIP: "10.1.0.7"}},
		{name: "check: gone is died", action: "check_sandbox", ids: []string{"sb-1"},
			replies: []reply{{"PodSandboxStatus", "sb-1", nil, errNotFound}},
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventDied}, id: "sb-1", ids: []string{"sb-1"}}},
		{name: "check: not ready is died", action: "check_sandbox", ids: []string{"sb-1"},
			replies: []reply{{"PodSandboxStatus", "sb-1", sbStatus(notReady, ""), nil}},
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventDied}, id: "sb-1", ids: []string{"sb-1"}}},
		{name: "check: still unknown", action: "check_sandbox", ids: []string{"sb-1"},
			replies: []reply{{"PodSandboxStatus", "sb-1", nil, errors.New("deadline exceeded")}},
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventStatusFailed}, id: "sb-1", ids: []string{"sb-1"}, failed: true}},
		{name: "stop: every sandbox, a gone one counts as stopped", action: "stop_sandbox", ids: []string{"sb-0", "sb-1"},
			replies: []reply{{"StopPodSandbox", "sb-0", nil, errNotFound}, {"StopPodSandbox", "sb-1", nil, nil}},
			want:    sbWant{raised: []fsm.SandboxEvent{fsm.SandboxEventStopped}, id: "sb-1", ids: []string{"sb-0", "sb-1"}}},
		{name: "stop: one fails, the others are still stopped, no stopped", action: "stop_sandbox", ids: []string{"sb-0", "sb-1"},
			replies: []reply{{"StopPodSandbox", "sb-0", nil, errors.New("busy")}, {"StopPodSandbox", "sb-1", nil, nil}},
			want:    sbWant{id: "sb-1", ids: []string{"sb-0", "sb-1"}, failed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakePod()
			p.pod.Spec.HostNetwork = tc.host
			s := p.sandbox()
			if len(tc.ids) > 0 {
				s.ids, s.id = tc.ids, tc.ids[len(tc.ids)-1]
			}
			o := runAction(t, tc.action, s, tc.replies)
			got := sbWant{raised: p.raised, id: s.ID(), ids: s.IDs(), podIP: s.PodIP(), failed: o.Err() != nil}
			if (o.Err() != nil) != (s.Err() != nil) {
				t.Errorf("action error %v, Err() %v: want both or neither", o.Err(), s.Err())
			}
			if got.String() != tc.want.String() {
				t.Errorf("sandbox: %v\nwant:    %v", got, tc.want)
			}
		})
	}
}
