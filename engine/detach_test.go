package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
)

// blockingStart is a runtime whose StartContainer waits until released and
// reports whether its context ended meanwhile.
type blockingStart struct {
	cri.Runtime
	entered  chan struct{}
	release  chan struct{}
	canceled chan bool
}

func (b *blockingStart) StartContainer(ctx context.Context, id string) error {
	close(b.entered)
	select {
	case <-b.release:
		b.canceled <- false
	case <-ctx.Done():
		b.canceled <- true
	}
	return nil
}

// A kill cancels the pod's running actions, but a StartContainer already
// sent runs to its end (containerd would start the task anyway); stopping
// the engine still ends it.
func TestKillDoesNotCancelStartContainer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stopEngine bool
		want       bool // the call's context ended
	}{{"kill", false, false}, {"engine stops", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := &blockingStart{entered: make(chan struct{}), release: make(chan struct{}), canceled: make(chan bool, 1)}
			run, stopRun := context.WithCancel(context.Background())
			defer stopRun()
			rt := detachedRuntime{Runtime: b, run: func() context.Context { return run }}
			action, kill := context.WithCancel(run)
			go rt.StartContainer(action, "c1")
			<-b.entered
			kill()
			if tc.stopEngine {
				stopRun()
			} else {
				// Give a wrongly cancelled call the time to notice; the
				// release below ends a correct one.
				time.Sleep(50 * time.Millisecond)
				close(b.release)
			}
			if got := <-b.canceled; got != tc.want {
				t.Errorf("StartContainer's context ended = %v, want %v", got, tc.want)
			}
		})
	}
}

// failingCreates answers every create with containerd's "name is reserved"
// error, as after an earlier attempt whose reply was lost.
type failingCreates struct {
	cri.Runtime
}

const reservedID = "7887782cd3ca21c0db1967e1f7b8f3173e0bf6739cca91fedcfe6c7ad5df352c"

func (failingCreates) RunPodSandbox(context.Context, *runtimeapi.PodSandboxConfig, string) (string, error) {
	return "", status.Error(codes.Unknown, `failed to reserve sandbox name "p_default_u_0": name "p_default_u_0" is reserved for "`+reservedID+`"`)
}

func (failingCreates) CreateContainer(context.Context, string, *runtimeapi.ContainerConfig, *runtimeapi.PodSandboxConfig) (string, error) {
	return "", errors.New(`cri unix:///x.sock: CreateContainer "main": failed to reserve container name \"main_p_default_u_0\": name \"main_p_default_u_0\" is reserved for \"` + reservedID + `\"`)
}

// A CreateContainer that finds its name reserved by an earlier unanswered
// attempt of itself adopts that container instead of failing on every retry
// (containerd keeps the name until the object is removed). RunPodSandbox
// passes the answer on: the sandbox machine's run_sandbox adopts a reserved
// sandbox only once the runtime describes it as ready
// (testdata/sandbox_reply_lost.txt).
func TestCreateAdoptsReservedName(t *testing.T) {
	rt := detachedRuntime{Runtime: failingCreates{}}
	if _, err := rt.RunPodSandbox(context.Background(), &runtimeapi.PodSandboxConfig{}, ""); cri.ReservedFor(err) != reservedID {
		t.Errorf("RunPodSandbox: %v; want the reserved sandbox %s in the error", err, reservedID)
	}
	if id, err := rt.CreateContainer(context.Background(), "sb", &runtimeapi.ContainerConfig{}, nil); err != nil || id != reservedID {
		t.Errorf("CreateContainer = %q, %v; want the reserved container %s", id, err, reservedID)
	}
	if cri.ReservedFor(errors.New("something else")) != "" {
		t.Error("an unrelated error was taken for a reserved name")
	}
}
