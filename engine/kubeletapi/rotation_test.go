package kubeletapi_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/containerlogs"
)

// TestLogRotation: a container on containerd writes 50 MiB in 1 MiB bursts
// while the rotator (max size 2 MiB, max 3 files) checks every 100 ms. Its
// log directory never holds more than 3 files, their total stays under
// 3 × (max size + one burst and its CRI framing), and the end of the output
// is still what /containerLogs shows.
func TestLogRotation(t *testing.T) {
	n := startNode(t, onlyUser("admin"), nil)
	const maxSize, maxFiles, burst = 2 << 20, 3, 1 << 20
	rot := &containerlogs.Rotator{Runtime: n.rt, MaxSize: maxSize, MaxFiles: maxFiles}
	ctx, cancel := context.WithCancel(context.Background())
	rotDone := make(chan struct{})
	go func() { rot.Run(ctx, 100*time.Millisecond); close(rotDone) }()
	defer func() { cancel(); <-rotDone }()

	// 50 bursts of 16384 lines of 63 characters and a newline (1 MiB each)
	p := n.pod("writer", v1.Container{Name: "main", Command: []string{"sh", "-c",
		`i=0; while [ $i -lt 50 ]; do yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -n 16384; i=$((i+1)); sleep 0.3; done; echo done; sleep 3600`}})
	n.updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{p}, Source: config.SourceFile}
	admin := n.httpClient(t, "admin")
	u := n.base + "/containerLogs/default/writer/main"
	var dir string
	worst := int64(0)
	maxCount := 0
	n.waitFor(t, "the writer done", func() bool {
		if dir == "" {
			if s := n.status("writer"); s != nil && s.Status.Phase == v1.PodRunning {
				dir = logDir(t, n, "writer")
			}
			return false
		}
		files, total := onDisk(t, dir)
		if total > worst {
			worst = total
		}
		if files > maxCount {
			maxCount = files
		}
		code, body := get(t, admin, u+"?tailLines=1")
		return code == 200 && body == "done\n"
	})
	// CRI framing: a timestamp, the stream and the tag (about 40 bytes) per line
	// What is written between two checks: one burst, or two when a loaded
	// machine delays a check past the next burst (polling, as kubelet's).
	bound := int64(maxFiles * (maxSize + 2*(burst+16384*40)))
	if maxCount > maxFiles || worst > bound {
		t.Errorf("log files on disk: at most %d files and %d bytes seen, want <= %d files and <= %d bytes", maxCount, worst, maxFiles, bound)
	}
	_, total := onDisk(t, dir)
	if total >= 50<<20 {
		t.Errorf("%d bytes on disk after 50 MiB: nothing was rotated away", total)
	}
	// the tail across the current and rotated files
	_, body := get(t, admin, u+"?tailLines=3")
	if body != strings.Repeat("a", 63)+"\n"+strings.Repeat("a", 63)+"\ndone\n" {
		t.Errorf("tail after rotation: %q", body)
	}
}

// logDir finds the directory of a pod's container logs from the runtime.
func logDir(t *testing.T, n *node, pod string) string {
	t.Helper()
	cs, err := n.rt.ListContainers(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Labels[engine.LabelPodName] == pod {
			st, err := n.rt.ContainerStatus(context.Background(), c.Id)
			if err != nil {
				t.Fatal(err)
			}
			return filepath.Dir(st.LogPath)
		}
	}
	t.Fatalf("no container of pod %s", pod)
	return ""
}

// onDisk counts the files and bytes in dir.
func onDisk(t *testing.T, dir string) (files int, total int64) {
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if fi, err := e.Info(); err == nil && !fi.IsDir() {
			files++
			total += fi.Size()
		}
	}
	return files, total
}
