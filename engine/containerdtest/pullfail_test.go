package containerdtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
)

// TestContainerdPullFailureMessages: what a user reads of pulls that fail
// on a real containerd, as kubelet v1.34 shows it (images.pullImage,
// kuberuntime startContainer): a tag the harness registry lacks
// (IfNotPresent), a registry on a closed port of 127.0.0.1 (Always), and an
// absent image under pull policy Never. ErrImagePull's message is
// containerd's error as kubelet's CRI client gives it (the message alone
// for code Unknown, `rpc error: code = ... desc = ...` otherwise: the
// expected text is made from containerd's own answer to the same pull);
// ImagePullBackOff's appends it to "Back-off pulling image"; the events are
// kubelet's Pulling, Failed "Failed to pull image ...", Failed "Error:
// ErrImagePull", BackOff, Failed "Error: ImagePullBackOff" (and
// ErrImageNeverPull, Failed "Error: ErrImageNeverPull").
func TestContainerdPullFailureMessages(t *testing.T) {
	c, ctx := containerdFor(t, 2*time.Minute)
	gone := c.Registry.Addr + "/nosuch:1.0"
	down := fmt.Sprintf("127.0.0.1:%d/app:1.0", harness.FreePort(t))
	never := c.Registry.Addr + "/absent:1.0"
	pod := func(name, image string, policy v1.PullPolicy) *v1.Pod {
		p := shPod(c, name, v1.RestartPolicyAlways, 1, "sleep 3600")
		p.Spec.Containers[0].Image, p.Spec.Containers[0].ImagePullPolicy = image, policy
		return p
	}
	pods := []*v1.Pod{pod("gone", gone, v1.PullIfNotPresent), pod("down", down, v1.PullAlways), pod("never", never, v1.PullNever)}
	events := &podEvents{}
	rt, e, updates := startPods(ctx, t, c, engine.Config{Events: events}, pods...)
	seen := map[string][]string{} // pod: every distinct "reason: message" it showed, in order
	watch := func() {
		for _, p := range e.Pods() {
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil && w.Message != "" {
					if s := w.Reason + ": " + w.Message; !slices.Contains(seen[p.Name], s) {
						seen[p.Name] = append(seen[p.Name], s)
					}
				}
			}
		}
	}
	waitFor(t, ctx, "ImagePullBackOff of gone and down, ErrImageNeverPull of never", func() bool {
		watch()
		shows := func(name, reason string) bool {
			return slices.ContainsFunc(seen[name], func(s string) bool { return strings.HasPrefix(s, reason+": ") })
		}
		return shows("gone", engine.ReasonImagePullBackOff) && shows("down", engine.ReasonImagePullBackOff) && shows("never", engine.ReasonErrImageNeverPull)
	}, e)

	for _, x := range []struct{ name, image string }{{"gone", gone}, {"down", down}} {
		msg := kubeletPullMessage(ctx, t, rt, x.image)
		t.Logf("%s: waiting messages %q; events %q", x.name, seen[x.name], events.of("default/"+x.name))
		want := []string{
			engine.ReasonErrImagePull + ": " + msg,
			fmt.Sprintf("%s: Back-off pulling image %q: ErrImagePull: %s", engine.ReasonImagePullBackOff, x.image, msg),
		}
		// A status published between the two may be missed; what was
		// seen must be these, in this order, ending with the backoff.
		if got := seen[x.name]; len(got) == 0 || got[len(got)-1] != want[1] || len(got) > 2 || len(got) == 2 && got[0] != want[0] {
			t.Errorf("%s: waiting messages\n%q\nwant\n%q", x.name, got, want)
		}
		for _, ev := range []string{
			fmt.Sprintf("Pulling: Pulling image %q", x.image),
			fmt.Sprintf("Failed: Failed to pull image %q: %s", x.image, msg),
			"Failed: Error: ErrImagePull",
			fmt.Sprintf("BackOff: Back-off pulling image %q", x.image),
			"Failed: Error: ImagePullBackOff",
		} {
			if !events.has("default/"+x.name, ev) {
				t.Errorf("%s: no event %q in %q", x.name, ev, events.of("default/"+x.name))
			}
		}
	}
	neverMsg := fmt.Sprintf("Container image %q is not present with pull policy of Never", never)
	if got, want := seen["never"], []string{engine.ReasonErrImageNeverPull + ": " + neverMsg}; !slices.Equal(got, want) {
		t.Errorf("never: waiting messages %q, want %q", got, want)
	}
	for _, ev := range []string{"ErrImageNeverPull: " + neverMsg, "Failed: Error: ErrImageNeverPull"} {
		if !events.has("default/never", ev) {
			t.Errorf("never: no event %q in %q", ev, events.of("default/never"))
		}
	}
	if slices.ContainsFunc(events.of("default/never"), func(s string) bool { return strings.HasPrefix(s, "Pulling:") }) {
		t.Errorf("never: pulled: %q", events.of("default/never"))
	}
	removePods(updates, pods...)
	waitFor(t, ctx, "pods removed", func() bool { return len(e.Pods()) == 0 }, e)
}

// kubeletPullMessage pulls image from the test's own client and returns
// containerd's failure as kubelet's CRI client (k8s.io/cri-client
// remoteImageService.pullImageV1) gives it to kubelet: the status message
// alone for code Unknown, the status error's text otherwise.
func kubeletPullMessage(ctx context.Context, t *testing.T, rt cri.Full, image string) string {
	t.Helper()
	_, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: image}, nil, nil)
	var ce *cri.Error
	if !errors.As(err, &ce) {
		t.Fatalf("pull %s: %v, want a failed CRI call", image, err)
	}
	if s, ok := status.FromError(ce.Err); ok && s.Code() == codes.Unknown {
		return s.Message()
	}
	return ce.Err.Error()
}

// of returns the events recorded for pod, "Reason: message".
func (r *podEvents) of(pod string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got[pod])
}
