package worker

import (
	"errors"
	"fmt"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/images"
	"github.com/speclet/speclet/fsm"
)

// TestImageActionsAsOperations drives the container machine's image
// actions through a pod's container (engine/images' Puller with ctrState as
// its images.Container, and the waiting reason and image reference the
// embedded containers.Container keeps), fed the runtime's replies by hand.
// engine/containers drives the other actions.
func TestImageActionsAsOperations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		action  string // the spec name of an action of ctrOps
		replies []reply
		raised  []fsm.ContainerEvent
		waiting string
		image   string
		failed  bool
	}{
		{name: "check_image: present, its ID is the reference", action: "check_image",
			replies: []reply{{"ImageStatus", "busybox:latest", &runtimeapi.Image{Id: "sha256:1"}, nil}},
			raised:  []fsm.ContainerEvent{fsm.ContainerEventImagePresent}, image: "sha256:1"},
		{name: "check_image: missing", action: "check_image",
			replies: []reply{{"ImageStatus", "busybox:latest", nil, nil}},
			raised:  []fsm.ContainerEvent{fsm.ContainerEventImageMissing}},
		{name: "check_image: ImageStatus fails", action: "check_image",
			replies: []reply{{"ImageStatus", "busybox:latest", nil, errors.New("unavailable")}},
			raised:  []fsm.ContainerEvent{fsm.ContainerEventImageCheckFailed}, waiting: images.ReasonImageInspectError, failed: true},
		{name: "pull: without credentials, then the size", action: "pull_image",
			replies: []reply{{"PullInputs", "busybox:latest", images.PullInputs{}, nil}, {"PullImage", "busybox:latest", "sha256:2", nil},
				{"ImageStatus", "busybox:latest", nil, errors.New("size unknown")}},
			raised: []fsm.ContainerEvent{fsm.ContainerEventPullOk}, image: "sha256:2"},
		{name: "pull: each credential in turn until one succeeds", action: "pull_image",
			replies: []reply{{"PullInputs", "busybox:latest", images.PullInputs{Auths: []*runtimeapi.AuthConfig{{Username: "a"}, {Username: "b"}}}, nil},
				{"PullImage", "busybox:latest a", nil, errors.New("denied")}, {"PullImage", "busybox:latest b", "sha256:2", nil},
				{"ImageStatus", "busybox:latest", &runtimeapi.Image{Size: 4096}, nil}},
			raised: []fsm.ContainerEvent{fsm.ContainerEventPullOk}, image: "sha256:2"},
		{name: "pull: every credential refused", action: "pull_image",
			replies: []reply{{"PullInputs", "busybox:latest", images.PullInputs{Auths: []*runtimeapi.AuthConfig{{Username: "a"}, {Username: "b"}}}, nil},
				{"PullImage", "busybox:latest a", nil, errors.New("denied")}, {"PullImage", "busybox:latest b", nil, errors.New("denied")}},
			raised: []fsm.ContainerEvent{fsm.ContainerEventPullFailed}, waiting: images.ReasonErrImagePull, failed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testPod(t).all()[0]
			o := runAction(t, ctrOps, tc.action, c, tc.replies)
			reason, _ := c.Waiting()
			got := fmt.Sprintf("raised %v, waiting %q, image %q, failed %v", c.run.Pending(), reason, c.ImageRef(), o.Err() != nil)
			if want := fmt.Sprintf("raised %v, waiting %q, image %q, failed %v", tc.raised, tc.waiting, tc.image, tc.failed); got != want {
				t.Errorf("container: %s\nwant:      %s", got, want)
			}
		})
	}
}
