package chaos

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestLostStart: only the status containerd leaves after a cancelled task
// creation or start counts as its leak; every other failed start is
// speclet's to clean up.
func TestLostStart(t *testing.T) {
	exited := runtimeapi.ContainerState_CONTAINER_EXITED
	for _, tc := range []struct {
		name string
		st   *runtimeapi.ContainerStatus
		want bool
	}{
		{"cancelled creation (containerd issue 11037)", &runtimeapi.ContainerStatus{State: exited, Reason: "StartError", ExitCode: 128,
			Message: "failed to create containerd task: failed to get task pid: context canceled: unknown"}, true},
		{"cancelled start", &runtimeapi.ContainerStatus{State: exited, Reason: "StartError", ExitCode: 128,
			Message: `failed to start containerd task "971f7aeefcbe": context canceled: unknown`}, true},
		{"a start that failed on its own", &runtimeapi.ContainerStatus{State: exited, Reason: "StartError", ExitCode: 128,
			Message: `failed to create containerd task: failed to create shim task: exec: "nope": executable file not found in $PATH`}, false},
		{"a crash", &runtimeapi.ContainerStatus{State: exited, Reason: "Error", ExitCode: 1, Message: "context canceled"}, false},
		{"still running", &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING, Reason: "StartError",
			Message: "failed to create containerd task: context canceled"}, false},
	} {
		if got := lostStart(tc.st); got != tc.want {
			t.Errorf("%s: lostStart = %v, want %v", tc.name, got, tc.want)
		}
	}
}
