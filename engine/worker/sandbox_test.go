package worker

import (
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/podspec"
)

// TestSandboxConfigRebuilt: the config of a sandbox adopted after a
// restart is built again for its attempt, as RunSandbox built it.
func TestSandboxConfigRebuilt(t *testing.T) {
	s := testPod(t)
	h, pod := s.h, s.pod
	want, err := sandboxConfig(h.Node, pod, 2, s.cgroupParent(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.sandbox.adopt(&Adopted{Sandboxes: []*runtimeapi.PodSandbox{{Id: "sb-2", State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{Attempt: 2}}}})
	got := s.sandbox.Config()
	if !proto.Equal(got, want) || got.LogDirectory != podspec.LogDir(h.Node.LogsDir(), pod) {
		t.Errorf("rebuilt config %v, want %v", got, want)
	}
}
