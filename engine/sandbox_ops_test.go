package engine

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/fsm"
)

// sbWant is where the sandbox stands once its action is done.
type sbWant struct {
	raised []fsm.SandboxEvent
	id     string
	ids    []string
	podIP  string
	failed bool // the action's error (and sb.err) is set
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
			sb := testSandbox(t)
			sb.p.pod.Spec.HostNetwork = tc.host
			if len(tc.ids) > 0 {
				sb.ids, sb.id = tc.ids, tc.ids[len(tc.ids)-1]
			}
			o := runAction(t, sandboxOps, tc.action, sb, tc.replies)
			got := sbWant{raised: sb.run.Pending(), id: sb.id, ids: sb.ids, podIP: sb.podIP, failed: o.Err() != nil}
			if (o.Err() != nil) != (sb.err != nil) {
				t.Errorf("action error %v, sb.err %v: want both or neither", o.Err(), sb.err)
			}
			if got.String() != tc.want.String() {
				t.Errorf("sandbox: %v\nwant:    %v", got, tc.want)
			}
		})
	}
}

// testSandbox is the sandbox machine of a new pod of an engine whose
// runtime answers nothing: the test feeds the replies.
func testSandbox(t *testing.T) *sandboxState {
	t.Helper()
	e, err := New(Config{Runtime: nopRuntime{}, RootDir: t.TempDir(), Clock: clocktesting.NewFakeClock(time.Now()),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	pod := benchPod(0)
	return newPodState(newPodWorker(e, pod, nil), pod, nil).sandbox
}
