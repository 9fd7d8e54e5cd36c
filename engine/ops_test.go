package engine

import (
	"fmt"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/op"
)

// reply is one operation a sandbox action asks for, as the test expects
// it (name, and the sandbox ID or host argument it is about), and the
// result the test feeds it.
type reply struct {
	op, about string
	v         any
	err       error
}

// drive feeds o the replies in order, checking that each operation is the
// one expected, and returns the op that ends the action.
func drive(t *testing.T, o op.Op, replies []reply) op.Op {
	t.Helper()
	for i, r := range replies {
		if o.Done() {
			t.Fatalf("step %d: the action ended (%v), want %s about %q", i, o.Err(), r.op, r.about)
		}
		if o.Name() != r.op || about(o) != r.about {
			t.Fatalf("step %d: %s about %q, want %s about %q", i, o, about(o), r.op, r.about)
		}
		o = o.Reply(r.v, r.err)
	}
	if !o.Done() {
		t.Fatalf("after every reply the action asks for %s about %q", o, about(o))
	}
	return o
}

// about is what an operation is about: the sandbox or container ID (and a
// stop's timeout), the pod or container name of a create, the image, or a
// host step's argument.
func about(o op.Op) string {
	switch r := o.Request().(type) {
	case *runtimeapi.RunPodSandboxRequest:
		return r.Config.GetMetadata().GetName()
	case *runtimeapi.PodSandboxStatusRequest:
		return r.PodSandboxId
	case *runtimeapi.StopPodSandboxRequest:
		return r.PodSandboxId
	case *runtimeapi.RemovePodSandboxRequest:
		return r.PodSandboxId
	case *runtimeapi.ImageStatusRequest:
		return r.Image.GetImage()
	case *runtimeapi.PullImageRequest:
		if u := r.Auth.GetUsername(); u != "" {
			return r.Image.GetImage() + " " + u
		}
		return r.Image.GetImage()
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
	}
	return strings.TrimSpace(fmt.Sprint(o.Request()))
}
