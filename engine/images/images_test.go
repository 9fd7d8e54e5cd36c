package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/op/optest"
	"github.com/speclet/speclet/fsm"
)

// fakeContainer is a container as the tests set it up; it records what
// the Puller tells it.
type fakeContainer struct {
	spec            *v1.Container
	pod             *v1.Pod
	secrets         Secrets
	reason, message string
	imageRef        string
	raised          []fsm.ContainerEvent
	events          []string // "type reason: message", the pod's prefixed "pod "
	pulls           int
	backoff         []string // "next", "reset"
}

func newFake(image string) *fakeContainer {
	return &fakeContainer{spec: &v1.Container{Name: "app", Image: image},
		pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}}
}

func (c *fakeContainer) puller() *Puller {
	p := &Puller{}
	p.Bind(c)
	return p
}

func (c *fakeContainer) Name() string                                { return c.spec.Name }
func (c *fakeContainer) Spec() *v1.Container                         { return c.spec }
func (c *fakeContainer) Pod() *v1.Pod                                { return c.pod }
func (c *fakeContainer) Key() string                                 { return "default/web" }
func (c *fakeContainer) Runtime() cri.Runtime                        { return nil }
func (c *fakeContainer) Now() time.Time                              { return time.Unix(0, 0) }
func (c *fakeContainer) Logger() *slog.Logger                        { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (c *fakeContainer) Secrets() Secrets                            { return c.secrets }
func (c *fakeContainer) SandboxConfig() *runtimeapi.PodSandboxConfig { return nil }
func (c *fakeContainer) Waiting() (string, string)                   { return c.reason, c.message }
func (c *fakeContainer) SetWaiting(reason, msg string)               { c.reason, c.message = reason, msg }
func (c *fakeContainer) SetImageRef(ref string)                      { c.imageRef = ref }
func (c *fakeContainer) Raise(ev fsm.ContainerEvent)                 { c.raised = append(c.raised, ev) }
func (c *fakeContainer) Pulled(time.Duration)                        { c.pulls++ }
func (c *fakeContainer) Event(eventType, reason, format string, args ...any) {
	c.events = append(c.events, eventType+" "+reason+": "+fmt.Sprintf(format, args...))
}
func (c *fakeContainer) PodEvent(eventType, reason, format string, args ...any) {
	c.events = append(c.events, "pod "+eventType+" "+reason+": "+fmt.Sprintf(format, args...))
}
func (c *fakeContainer) PullBackoff(reset bool) {
	c.backoff = append(c.backoff, map[bool]string{true: "reset", false: "next"}[reset])
}

// fakeSecrets holds secrets by name; any other is an error.
type fakeSecrets map[string]*v1.Secret

func (s fakeSecrets) GetSecret(_ context.Context, namespace, name string) (*v1.Secret, error) {
	if sec, ok := s[namespace+"/"+name]; ok {
		return sec, nil
	}
	return nil, errors.New("secrets " + name + " not found")
}

// TestPullPolicy: the guards read the effective policy, defaulted from the
// tag (latest or none: Always, else IfNotPresent).
func TestPullPolicy(t *testing.T) {
	for _, tc := range []struct {
		image         string
		policy        v1.PullPolicy
		always, never bool
	}{
		{"busybox", "", true, false},
		{"busybox:latest", "", true, false},
		{"busybox:1.36", "", false, false},
		{"busybox:1.36", v1.PullAlways, true, false},
		{"busybox:latest", v1.PullNever, false, true},
	} {
		c := newFake(tc.image)
		c.spec.ImagePullPolicy = tc.policy
		p := c.puller()
		if p.PullAlways() != tc.always || p.PullNever() != tc.never {
			t.Errorf("%s %q: pull_always %v, pull_never %v; want %v, %v", tc.image, tc.policy, p.PullAlways(), p.PullNever(), tc.always, tc.never)
		}
	}
}

// drive runs o with the steps (optest.Drive) and returns the op that ends
// it.
func drive(t *testing.T, o op.Op, declared []string, steps ...optest.Step) op.Op {
	t.Helper()
	return optest.Drive(t, o, declared, steps)
}

// TestPull: a pull is Pulling then Pulled with the image's size, records
// the image's ID, counts the pull and resets the backoff; a refused one is
// ErrImagePull with the runtime's message and kubelet's two Failed events.
func TestPull(t *testing.T) {
	declared := fsm.ContainerActionCRI[fsm.ContainerActionPullImage]
	c := newFake("registry.local/app:1")
	drive(t, c.puller().PullImage(), declared,
		optest.Step{Op: "PullInputs", About: "registry.local/app:1", V: PullInputs{}},
		optest.Step{Op: "PullImage", About: "registry.local/app:1", V: "sha256:2"},
		optest.Step{Op: "ImageStatus", About: "registry.local/app:1", V: &runtimeapi.Image{Size: 4096}})
	want := []string{`Normal Pulling: Pulling image "registry.local/app:1"`,
		`Normal Pulled: Successfully pulled image "registry.local/app:1" in 0s (0s including waiting). Image size: 4096 bytes.`}
	if !slices.Equal(c.events, want) || c.imageRef != "sha256:2" || c.pulls != 1 || !slices.Equal(c.backoff, []string{"reset"}) ||
		!slices.Equal(c.raised, []fsm.ContainerEvent{fsm.ContainerEventPullOk}) {
		t.Errorf("pulled: events %q, image %q, pulls %d, backoff %q, raised %v", c.events, c.imageRef, c.pulls, c.backoff, c.raised)
	}

	c = newFake("registry.local/app:1")
	o := drive(t, c.puller().PullImage(), declared,
		optest.Step{Op: "PullInputs", About: "registry.local/app:1", V: PullInputs{}},
		optest.Step{Op: "PullImage", About: "registry.local/app:1", Err: &cri.Error{Op: "PullImage", Class: cri.ClassOther, Err: errors.New("manifest unknown")}})
	if o.Err() == nil || c.reason != ReasonErrImagePull || !strings.Contains(c.message, "manifest unknown") || c.pulls != 0 {
		t.Errorf("refused: error %v, waiting %s %q, pulls %d", o.Err(), c.reason, c.message, c.pulls)
	}
	if n := len(c.events); n != 3 || !strings.HasPrefix(c.events[1], `Warning Failed: Failed to pull image "registry.local/app:1": `) ||
		c.events[2] != "Warning Failed: Error: ErrImagePull" {
		t.Errorf("refused: events %q", c.events)
	}
}

// TestPullCredentials: the pod's pull secrets that apply to the image are
// the pull's credentials; a secret that cannot be read is left out with a
// FailedToRetrieveImagePullSecret event of the pod, and so is every one
// without an API server.
func TestPullCredentials(t *testing.T) {
	cfg := `{"auths":{"registry.local":{"username":"u","password":"p"}}}`
	sec := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: "default"}, Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(cfg)}}
	for _, tc := range []struct {
		name    string
		refs    []string
		secrets Secrets
		users   []string
		events  []string
	}{
		{name: "none"},
		{name: "one that applies", refs: []string{"regcred"}, secrets: fakeSecrets{"default/regcred": sec}, users: []string{"u"}},
		{name: "one missing, the other applies", refs: []string{"gone", "regcred"}, secrets: fakeSecrets{"default/regcred": sec}, users: []string{"u"},
			events: []string{"pod Warning FailedToRetrieveImagePullSecret: Unable to retrieve some image pull secrets (gone); attempting to pull the image may not succeed."}},
		{name: "no API server", refs: []string{"regcred"}, users: nil,
			events: []string{"pod Warning FailedToRetrieveImagePullSecret: Unable to retrieve some image pull secrets (regcred); attempting to pull the image may not succeed."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newFake("registry.local/app:1")
			c.secrets = tc.secrets
			for _, r := range tc.refs {
				c.pod.Spec.ImagePullSecrets = append(c.pod.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: r})
			}
			var users []string
			for _, a := range c.puller().credentials(t.Context(), c.spec.Image) {
				users = append(users, a.Username)
			}
			if !slices.Equal(users, tc.users) || !slices.Equal(c.events, tc.events) {
				t.Errorf("credentials of %q, events %q; want %q, %q", users, c.events, tc.users, tc.events)
			}
		})
	}
}

// TestRefusals: a missing image under pull policy Never and an invalid
// image name are shown with kubelet's reasons and events; an invalid name
// already shown records nothing again.
func TestRefusals(t *testing.T) {
	c := newFake("busybox:1.36")
	mustDone(t, c.puller().RefuseNeverPull())
	want := []string{`Warning ErrImageNeverPull: Container image "busybox:1.36" is not present with pull policy of Never`, "Warning Failed: Error: ErrImageNeverPull"}
	if c.reason != ReasonErrImageNeverPull || !slices.Equal(c.events, want) {
		t.Errorf("never pull: waiting %s, events %q", c.reason, c.events)
	}

	c = newFake("Busybox:UPPER")
	p := c.puller()
	mustDone(t, p.RefuseImage())
	mustDone(t, p.RefuseImage())
	if c.reason != ReasonInvalidImageName || len(c.events) != 2 || !strings.HasPrefix(c.events[0], "Warning InspectFailed: ") {
		t.Errorf("invalid name: waiting %s %q, events %q; want one InspectFailed and one Failed", c.reason, c.message, c.events)
	}

	c = newFake("busybox:1.36")
	mustDone(t, c.puller().CountPullFailure())
	if !slices.Equal(c.backoff, []string{"next"}) {
		t.Errorf("count_pull_failure: backoff %q, want it advanced", c.backoff)
	}
}

// mustDone fails the test unless o, an action's first operation, ends the
// action at once and without error: the action asks the runtime nothing.
func mustDone(t *testing.T, o op.Op) {
	t.Helper()
	if !o.Done() || o.Err() != nil {
		t.Fatalf("action's operation %s, want done at once without error", o)
	}
}
