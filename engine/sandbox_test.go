package engine

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/engine/podspec"
)

// TestSandboxConfigRebuilt: once the sync that made the sandbox dropped its
// config, config() builds it again for the current sandbox's attempt, as
// RunSandbox built it.
func TestSandboxConfigRebuilt(t *testing.T) {
	e, err := New(Config{Runtime: nopRuntime{}, RootDir: t.TempDir(), Clock: clocktesting.NewFakeClock(time.Now()),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	pod := benchPod(0)
	w := newPodWorker(e, pod, nil)
	s := newPodState(w, pod, nil)
	want, err := sandboxConfig(e.podNode(), pod, 2, s.cgroupParent())
	if err != nil {
		t.Fatal(err)
	}
	s.sandbox.cfg, s.sandbox.attempt = want, 2
	if got := s.sandbox.config(); got != want {
		t.Error("config() did not return the config kept during the sync")
	}
	s.sandbox.cfg = nil
	got := s.sandbox.config()
	if got == want || !proto.Equal(got, want) || got.LogDirectory != podspec.LogDir(e.cfg.RootDir, pod) {
		t.Errorf("rebuilt config %v, want a new %v", got, want)
	}
}
