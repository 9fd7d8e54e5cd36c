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
	// ids are the running containers (nil: c1), all logging to path;
	// statuses counts ContainerStatus calls, which fail with statusErr.
	ids       []string
	statuses  int
	statusErr error
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ids := f.ids
	if ids == nil {
		ids = []string{"c1"}
	}
	var cs []*runtimeapi.Container
	for _, id := range ids {
		cs = append(cs, &runtimeapi.Container{Id: id, State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	}
	return cs, nil
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	f.statuses++
	if f.statusErr != nil {
		return nil, f.statusErr
	}
	return &runtimeapi.ContainerStatus{Id: id, LogPath: f.path}, nil
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

// TestRotateAsksLogPathOnce: a container's log path is asked of the runtime
// (ContainerStatus) once while it runs; a container that stopped running is
// forgotten, and one whose status failed is asked again next pass.
func TestRotateAsksLogPathOnce(t *testing.T) {
	rt := &fakeRuntime{path: filepath.Join(t.TempDir(), "0.log"), ids: []string{"c1", "c2"}}
	r := &Rotator{Runtime: rt, MaxSize: 10, MaxFiles: 3}
	pass := func(ids []string, statusErr error, want int) {
		t.Helper()
		rt.ids, rt.statusErr = ids, statusErr
		if err := r.RotateOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if rt.statuses != want {
			t.Errorf("running %v: %d ContainerStatus calls in all, want %d", ids, rt.statuses, want)
		}
	}
	pass([]string{"c1", "c2"}, nil, 2)
	pass([]string{"c1", "c2"}, nil, 2)                    // both known
	pass([]string{"c1"}, nil, 2)                          // c2 stopped: forgotten
	pass([]string{"c1", "c2"}, nil, 3)                    // c2 again (a new instance would have a new ID)
	pass([]string{"c1", "c2", "c3"}, errors.New("no"), 4) // c3's status fails
	pass([]string{"c1", "c2", "c3"}, nil, 5)              // and is asked again
}

// TestRotateKeepsLinks: a running container first seen (one that ran
// before a restart) gets its missing link back; a link that points at
// nothing goes, except a running container's (its file may be between
// rename and reopen); rotation keeps the link reading the current file.
func TestRotateKeepsLinks(t *testing.T) {
	dir := t.TempDir()
	links := filepath.Join(dir, "containers")
	rt := &fakeRuntime{path: filepath.Join(dir, "pods", "ns_p_u", "app", "0.log"), ids: []string{"c1"}}
	writeFile(t, rt.path, "0123456789abc")
	linkOf := func(c *runtimeapi.Container) string { return filepath.Join(links, "p_ns_app-"+c.Id+".log") }
	r := &Rotator{Runtime: rt, MaxSize: 10, MaxFiles: 3, LinkOf: linkOf, LinksDir: links}
	dead := filepath.Join(links, "p_ns_app-c0dead.log")
	if err := os.MkdirAll(links, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "pods", "gone", "0.log"), dead); err != nil {
		t.Fatal(err)
	}
	if err := r.RotateOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(links, "p_ns_app-c1.log")
	if got, err := os.Readlink(link); err != nil || got != rt.path {
		t.Errorf("link of running c1: %q, %v; want it to point at %s", got, err, rt.path)
	}
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Errorf("dead link kept: %v", err)
	}
	// rotated: the link reads the new, current file
	if rt.reopened != 1 {
		t.Fatalf("reopened %d times, want 1", rt.reopened)
	}
	writeFile(t, rt.path, "new\n")
	if b, err := os.ReadFile(link); err != nil || string(b) != "new\n" {
		t.Errorf("read through the link after rotation: %q, %v", b, err)
	}
	// a running container's link to a file that is not there is kept
	if err := os.Remove(rt.path); err != nil {
		t.Fatal(err)
	}
	if err := r.RotateOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("running container's link removed: %v", err)
	}
	// once it no longer runs, its dangling link goes
	rt.ids = []string{}
	if err := r.RotateOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("dangling link of a stopped container kept: %v", err)
	}
}
