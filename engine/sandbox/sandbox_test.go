package sandbox

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/op/optest"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/fsm"
)

// fakePod is a Sandbox's pod as the tests set it up; it records what the
// Sandbox reports.
type fakePod struct {
	pod      *v1.Pod
	done     bool
	ran      bool
	cgroups  Cgroups
	built    []string // BuildConfig's calls: "attempt rebuilt"
	buildErr error
	raised   []fsm.SandboxEvent
	events   []string // "type reason: message"
	stopping []string
}

func newFakePod() *fakePod {
	return &fakePod{pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u"},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways}}}
}

// sandbox is a Sandbox bound to p.
func (p *fakePod) sandbox() *Sandbox {
	s := &Sandbox{}
	s.Bind(p)
	return s
}

func (p *fakePod) Spec() *v1.Pod          { return p.pod }
func (p *fakePod) Key() string            { return p.pod.Namespace + "/" + p.pod.Name }
func (p *fakePod) Done() bool             { return p.done }
func (p *fakePod) Ran() bool              { return p.ran }
func (p *fakePod) RuntimeHandler() string { return "" }
func (p *fakePod) Cgroups() Cgroups       { return p.cgroups }
func (p *fakePod) Runtime() cri.Runtime   { return nil }
func (p *fakePod) Logger() *slog.Logger   { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (p *fakePod) Raise(ev fsm.SandboxEvent) {
	p.raised = append(p.raised, ev)
}
func (p *fakePod) Stopping(id string) { p.stopping = append(p.stopping, id) }
func (p *fakePod) Event(eventType, reason, format string, args ...any) {
	p.events = append(p.events, eventType+" "+reason+": "+fmt.Sprintf(format, args...))
}
func (p *fakePod) BuildConfig(attempt uint32, rebuilt bool) (*runtimeapi.PodSandboxConfig, error) {
	p.built = append(p.built, fmt.Sprint(attempt, " ", rebuilt))
	if p.buildErr != nil {
		return nil, p.buildErr
	}
	return &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: p.pod.Name, Attempt: attempt}}, nil
}

// TestRecreateForbidden: a new sandbox is refused once the pod is done, or
// under restartPolicy Never once a container has run; otherwise allowed.
func TestRecreateForbidden(t *testing.T) {
	for _, tc := range []struct {
		policy    v1.RestartPolicy
		done, ran bool
		want      bool
	}{
		{v1.RestartPolicyAlways, false, true, false},
		{v1.RestartPolicyOnFailure, false, true, false},
		{v1.RestartPolicyOnFailure, true, true, true},
		{v1.RestartPolicyNever, false, false, false},
		{v1.RestartPolicyNever, false, true, true},
		{v1.RestartPolicyNever, true, false, true},
	} {
		p := newFakePod()
		p.pod.Spec.RestartPolicy, p.done, p.ran = tc.policy, tc.done, tc.ran
		if got := p.sandbox().RecreateForbidden(); got != tc.want {
			t.Errorf("%s, done %v, a container ran %v: recreate_forbidden %v, want %v", tc.policy, tc.done, tc.ran, got, tc.want)
		}
	}
}

// TestConfigKeptThenRebuilt: during the sync that made the sandbox, Config
// is the config RunPodSandbox got; once dropped, it is built again for the
// current sandbox's attempt, as a rebuild (no DNS warning again); one that
// cannot be built is nil.
func TestConfigKeptThenRebuilt(t *testing.T) {
	p := newFakePod()
	p.pod.Spec.HostNetwork = true
	s := p.sandbox()
	s.ids = []string{"sb-0", "sb-1"} // two earlier attempts
	made := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Attempt: 2}}
	runAction(t, "run_sandbox", s, []reply{{"SandboxConfig", "2", made, nil}, {"MakeLogDirectory", "", nil, nil}, {"RunPodSandbox", "web", "sb-2", nil}})
	if got := s.Config(); got != made {
		t.Errorf("during the sync Config() = %v, want the config RunPodSandbox got", got)
	}
	s.DropConfig()
	if got := s.Config(); got == made || got.GetMetadata().GetAttempt() != 2 {
		t.Errorf("after the sync Config() = %v, want a new config of attempt 2", got)
	}
	if want := []string{"2 true"}; !slices.Equal(p.built, want) {
		t.Errorf("BuildConfig calls %q, want %q", p.built, want)
	}
	p.buildErr = errors.New("bad dnsConfig")
	if got := s.Config(); got != nil {
		t.Errorf("Config() = %v when it cannot be built, want nil", got)
	}
}

// TestCreateFailedIsRecorded: a sandbox that could not be made is a
// FailedCreatePodSandBox warning event of the pod.
func TestCreateFailedIsRecorded(t *testing.T) {
	p := newFakePod()
	s := p.sandbox()
	runAction(t, "run_sandbox", s, []reply{{"SandboxConfig", "0", sbConfig, nil}, {"MakeLogDirectory", "/logs/web", nil, nil},
		{"RunPodSandbox", "web", nil, errors.New("no network")}})
	want := []string{`Warning FailedCreatePodSandBox: Failed to create pod sandbox: run sandbox of pod "default/web": no network`}
	if !slices.Equal(p.events, want) {
		t.Errorf("events %q, want %q", p.events, want)
	}
}

// TestConfigFailedIsRecorded: a sandbox config that cannot be built is a
// FailedCreatePodSandBox warning event with the error as it is (kubelet's
// text for a user namespace the runtime lacks), and create_failed.
func TestConfigFailedIsRecorded(t *testing.T) {
	p := newFakePod()
	p.buildErr = errors.New("can't set `spec.hostUsers: false`, runtime does not support user namespaces")
	s := p.sandbox()
	runAction(t, "run_sandbox", s, []reply{{"SandboxConfig", "0", nil, p.buildErr}})
	want := []string{"Warning FailedCreatePodSandBox: Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces"}
	if !slices.Equal(p.events, want) {
		t.Errorf("events %q, want %q", p.events, want)
	}
	if s.Err() == nil {
		t.Error("no error kept for the delivering action")
	}
}

// fakeCgroups records the pod cgroups removed.
type fakeCgroups struct {
	calls []string
	err   error
}

func (c *fakeCgroups) Remove(uid types.UID) error {
	c.calls = append(c.calls, "remove "+string(uid))
	return c.err
}

// TestPodCgroup: run_sandbox starts with the sandbox config, with or
// without pod cgroups (the pod machine made the cgroup before); with them
// remove_pod_cgroup removes the pod's and returns its failure, without
// them it asks for nothing.
func TestPodCgroup(t *testing.T) {
	p := newFakePod()
	if o := p.sandbox().RemovePodCgroup(); !o.Done() || o.Err() != nil {
		t.Errorf("without pod cgroups remove_pod_cgroup asks for %s", o)
	}
	cg := &fakeCgroups{}
	p.cgroups = cg
	s := p.sandbox()
	if o := s.RunSandbox(); o.Name() != "SandboxConfig" {
		t.Errorf("run_sandbox starts with %s, want SandboxConfig", o)
	}
	cg.err = errors.New("device busy")
	if err := op.Exec(t.Context(), nil, s.RemovePodCgroup()); err == nil || len(cg.calls) != 1 || cg.calls[0] != "remove u" {
		t.Errorf("remove_pod_cgroup: %v, calls %q; want the pod's cgroup removed and its failure returned", err, cg.calls)
	}
}

// TestStopTellsThePLEG: every sandbox the engine stops itself is named to
// the PLEG before its StopPodSandbox, so that its stop is not news.
func TestStopTellsThePLEG(t *testing.T) {
	p := newFakePod()
	s := p.sandbox()
	s.ids, s.id = []string{"sb-0", "sb-1"}, "sb-1"
	runAction(t, "stop_sandbox", s, []reply{{"StopPodSandbox", "sb-0", nil, nil}, {"StopPodSandbox", "sb-1", nil, nil}})
	if want := []string{"sb-0", "sb-1"}; !slices.Equal(p.stopping, want) {
		t.Errorf("stopping %q, want %q", p.stopping, want)
	}
}

// TestRemove: every sandbox is removed, a gone one counts as removed, and
// the action goes on only when all are; a failure ends it with the error
// after trying the others.
func TestRemove(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replies []reply
		thenRan bool
	}{
		{"all removed, one was gone", []reply{{"RemovePodSandbox", "sb-0", nil, errNotFound}, {"RemovePodSandbox", "sb-1", nil, nil}}, true},
		{"one fails", []reply{{"RemovePodSandbox", "sb-0", nil, errors.New("busy")}, {"RemovePodSandbox", "sb-1", nil, nil}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakePod().sandbox()
			s.ids, s.id = []string{"sb-0", "sb-1"}, "sb-1"
			ran := false
			actions := map[string]optest.Action[*Sandbox]{"remove": {CRI: []string{"RemovePodSandbox"}, First: func(s *Sandbox) op.Op {
				return s.Remove(func() op.Op { ran = true; return op.Done(nil) })
			}}}
			o := optest.RunReplies(t, actions, "remove", s, tc.replies)
			if ran != tc.thenRan || (o.Err() == nil) != tc.thenRan {
				t.Errorf("went on %v, error %v; want went on %v and an error otherwise", ran, o.Err(), tc.thenRan)
			}
		})
	}
}

// TestAdopt: after a restart the newest ready sandbox is the current one
// and the machine resumes ready; with none ready, the newest is current
// and the machine resumes dead; with none, it stays where it starts. Every
// sandbox is kept for the pod's removal, oldest first.
func TestAdopt(t *testing.T) {
	sb := func(id string, attempt uint32, state runtimeapi.PodSandboxState) *runtimeapi.PodSandbox {
		return &runtimeapi.PodSandbox{Id: id, State: state, Metadata: &runtimeapi.PodSandboxMetadata{Attempt: attempt}}
	}
	for _, tc := range []struct {
		name      string
		sandboxes []*runtimeapi.PodSandbox // newest first, as runtimepods groups them
		ready     string
		state     fsm.SandboxState
		id        string
		ids       []string
	}{
		{"none", nil, "", fsm.SandboxInitialState, "", nil},
		{"the newest is ready", []*runtimeapi.PodSandbox{sb("b", 1, ready), sb("a", 0, notReady)}, "b", fsm.SandboxStateReady, "b", []string{"a", "b"}},
		{"none ready", []*runtimeapi.PodSandbox{sb("b", 1, notReady), sb("a", 0, notReady)}, "", fsm.SandboxStateDead, "b", []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakePod().sandbox()
			got, state := s.Adopt(&runtimepods.Pod{Sandboxes: tc.sandboxes})
			if got.GetId() != tc.ready || state != tc.state || s.ID() != tc.id || !slices.Equal(s.IDs(), tc.ids) {
				t.Errorf("adopted %q in %s, current %q, kept %q; want %q in %s, current %q, kept %q",
					got.GetId(), state, s.ID(), s.IDs(), tc.ready, tc.state, tc.id, tc.ids)
			}
		})
	}
}
