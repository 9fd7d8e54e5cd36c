package containerlogs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime runs one container whose log is at path; reopen creates a new
// empty file there, as the runtime does, or fails.
type fakeRuntime struct {
	path      string
	reopenErr error
	reopened  int
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return []*runtimeapi.Container{{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING}}, nil
}

func (f *fakeRuntime) ContainerStatus(context.Context, string) (*runtimeapi.ContainerStatus, error) {
	return &runtimeapi.ContainerStatus{Id: "c1", LogPath: f.path}, nil
}

func (f *fakeRuntime) ReopenContainerLog(context.Context, string) error {
	if f.reopenErr != nil {
		return f.reopenErr
	}
	f.reopened++
	return os.WriteFile(f.path, nil, 0o644)
}

func names(t *testing.T, dir string) string {
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range es {
		n = append(n, e.Name())
	}
	return strings.Join(n, " ")
}

// TestRotate: below max size nothing happens; at max size the log is renamed
// with the time and reopened; with max files 3, two rotated files stay (the
// oldest go); when the runtime cannot reopen, the file is renamed back.
func TestRotate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	rt := &fakeRuntime{path: path}
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	r := &Rotator{Runtime: rt, MaxSize: 10, MaxFiles: 3, Now: func() time.Time { return now }}
	write := func(n int) {
		if err := os.WriteFile(path, []byte(strings.Repeat("x", n)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	step := func(size int, want string) {
		t.Helper()
		write(size)
		if err := r.RotateOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := names(t, dir); got != want {
			t.Errorf("after a %d-byte log: %q, want %q", size, got, want)
		}
		now = now.Add(time.Second)
	}
	step(9, "0.log")
	step(10, "0.log 0.log.20261123-100001")
	step(11, "0.log 0.log.20261123-100001 0.log.20261123-100002")
	step(12, "0.log 0.log.20261123-100002 0.log.20261123-100003")
	if rt.reopened != 3 {
		t.Errorf("reopened %d times, want 3", rt.reopened)
	}
	rt.reopenErr = errors.New("runtime says no")
	step(13, "0.log 0.log.20261123-100003") // one old file made room, the log is back in place
	if b, _ := os.ReadFile(path); len(b) != 13 {
		t.Errorf("log after a failed reopen has %d bytes, want the 13 written", len(b))
	}
	if err := (&Rotator{Runtime: rt, MaxSize: 10, MaxFiles: 1}).RotateOnce(context.Background()); err == nil {
		t.Error("max files 1 accepted")
	}
}
