package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/engine/config"
)

// TestRemovedPodsReleaseMemory: five static manifests of 9 MB each (a
// large command argument, under config.MaxManifestBytes) run on the
// simulated runtime (real gRPC) through the manifest directory source and
// the merger; once the files are removed and the runtime is empty, the Go
// heap after a collection comes back (within 30 s) near what it was before
// the manifests came: nothing of a removed pod is kept (file contents, decoded pods, the
// merger's and the engine's copies, history, statuses, the runtime's
// records). The bound is 10 MB above the baseline: one manifest's worth,
// a fifth of the 45 MB of manifests.
func TestRemovedPodsReleaseMemory(t *testing.T) {
	const pods, argBytes = 5, 9 << 20
	srv, err := sim.Start(t.TempDir(), sim.Options{Images: []string{"busybox:latest"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	rt, err := cri.Dial(context.Background(), srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := New(Config{Runtime: rt, RootDir: t.TempDir(), NodeName: "node", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m := config.NewMerger(log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- e.Run(ctx, m.Updates()) }()
	go func() {
		done <- config.WatchDir(ctx, config.DirSource{Dir: dir, NodeName: "node", Period: 100 * time.Millisecond}, m, log)
	}()
	defer func() { cancel(); <-done; <-done }()

	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 2 min", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("recovered", func() bool { return e.Healthz() == nil })
	base := liveHeap()

	arg := strings.Repeat("x", argBytes)
	for i := range pods {
		body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"big-%d","namespace":"default"},"spec":{"terminationGracePeriodSeconds":1,"containers":[{"name":"app","image":"busybox:latest","command":["/bin/echo","%s"]}]}}`, i, arg)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("big-%d.json", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	arg = ""
	waitFor("all running", func() bool { return e.countRunning() == pods })
	running := liveHeap()
	for i := range pods {
		if err := os.Remove(filepath.Join(dir, fmt.Sprintf("big-%d.json", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("runtime empty", func() bool { sbs, cs := srv.Runtime.Len(); return sbs == 0 && cs == 0 })
	waitFor("pods forgotten", func() bool {
		e.mu.RLock()
		defer e.mu.RUnlock()
		return len(e.workers) == 0 && len(e.desired) == 0
	})
	// A worker's goroutine may still be returning (it holds its pod) when
	// the engine has forgotten it: the heap must come down within seconds,
	// not at this instant. What is kept for good (the history of a gone
	// pod is kept 15 minutes) stays above the bound.
	const bound = 10 << 20
	after := liveHeap()
	for deadline := time.Now().Add(30 * time.Second); after-base > bound && time.Now().Before(deadline); after = liveHeap() {
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("live heap: %d MB before, %d MB with %d pods of %d MB, %d MB after removal", base>>20, running>>20, pods, argBytes>>20, after>>20)
	if after-base > bound {
		if f, err := os.Create(filepath.Join(os.TempDir(), "speclet-podmemory.heap")); err == nil {
			runtime.GC()
			_ = writeHeapProfile(f)
			f.Close()
		}
		t.Errorf("after removal the live heap is %d MB above the baseline, want at most 10 MB", (after-base)>>20)
	}
}

func writeHeapProfile(w io.Writer) error { return pprof.Lookup("heap").WriteTo(w, 0) }
