package kubeletapi_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/containerlogs"
	"github.com/speclet/speclet/fsm"
)

// TestLogRotation: a container on containerd writes 50 MiB, in 50 bursts of
// 16384 lines of 64 bytes, while the rotator (max size 2 MiB, max 3 files)
// checks its log after each burst. The test drives both: a burst is written
// by an exec into the container's stdout, the check is a call of the
// rotation pass, so what is on disk after each check does not depend on how
// fast the machine is. After every check:
//   - the log directory holds at most 3 files (max-files);
//   - the current file is below max size (it was rotated if it reached it);
//   - a rotated file holds at most max size plus the one burst written
//     since the check before;
//
// and throughout:
//   - /containerLogs?tailLines=1 is the last burst's marker line;
//   - a follower that started before the first burst gets every line once,
//     in order, across the 25 rotations;
//
// and after the container exits and restarts, /containerLogs?previous=true
// with a tail longer than the current file reads the end of the old
// container's output across its rotated file and its last file.
func TestLogRotation(t *testing.T) {
	n := startNode(t, onlyUser("admin"), nil)
	const maxSize, maxFiles, bursts, lines = 2 << 20, 3, 50, 16384
	// a second per check: each rotation gets its own timestamped name
	clock := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	rotRT, rotCalls := auditedClient(t, n.rt.Endpoint())
	rot := &containerlogs.Rotator{Runtime: rotRT, MaxSize: maxSize, MaxFiles: maxFiles,
		Now: func() time.Time { clock = clock.Add(time.Second); return clock }}
	ctx := context.Background()

	p := n.pod("writer", v1.Container{Name: "main", Command: []string{"sh", "-c",
		`echo start; while [ ! -f /tmp/stop ]; do sleep 0.1; done; echo bye; exit 1`}})
	n.updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{p}, Source: config.SourceFile}
	admin := n.httpClient(t, "admin")
	u := n.base + "/containerLogs/default/writer/main"
	n.waitFor(t, "the writer started", func() bool {
		code, body := get(t, admin, u)
		return code == 200 && body == "start\n"
	})
	id, logPath := runningContainer(t, n, "writer")
	dir := filepath.Dir(logPath)

	// the follower: reports each marker line with the count of burst lines before it
	type mark struct {
		line    string
		before  int
		unknown string // a line that is neither
	}
	marks := make(chan mark, bursts+2)
	fctx, fcancel := context.WithCancel(ctx)
	defer fcancel()
	req, _ := http.NewRequestWithContext(fctx, http.MethodGet, u+"?follow=true", nil)
	resp, err := admin.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("follow: %v %v", resp, err)
	}
	line := strings.Repeat("a", 63)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		count := 0
		for sc.Scan() {
			switch l := sc.Text(); {
			case l == line:
				count++
			case l == "start" || strings.HasPrefix(l, "burst "):
				marks <- mark{line: l, before: count}
			default:
				marks <- mark{unknown: l}
			}
		}
		close(marks)
	}()
	expectMark := func(want string, before int) {
		t.Helper()
		var m mark
		ok := false
		select {
		case m, ok = <-marks:
		case <-time.After(2 * time.Minute):
			t.Fatalf("follower: no %q within 2 minutes", want)
		}
		if !ok || m.unknown != "" || m.line != want || m.before != before {
			t.Fatalf("follower: got %+v (open %v), want %q after %d burst lines", m, ok, want, before)
		}
	}
	expectMark("start", 0)

	framed := int64(0) // the largest burst on disk, with the CRI framing
	rotations := 0
	for i := 1; i <= bursts; i++ {
		before := current(t, logPath)
		res, err := n.rt.ExecSync(ctx, id, []string{"sh", "-c",
			fmt.Sprintf(`yes %s | head -n %d > /proc/1/fd/1; echo burst %d > /proc/1/fd/1`, line, lines, i)}, time.Minute)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("burst %d: %v exit %d %s", i, err, res.ExitCode, res.Stderr)
		}
		marker := fmt.Sprintf("burst %d", i)
		// the runtime copies the output to the log file on its own time
		n.waitFor(t, marker+" in the log", func() bool {
			_, body := get(t, admin, u+"?tailLines=1")
			return body == marker+"\n"
		})
		expectMark(marker, i*lines)
		if size := current(t, logPath) - before; size > framed {
			framed = size
		}
		rotatedBefore := rotatedFiles(t, logPath)
		if err := rot.RotateOnce(ctx); err != nil {
			t.Fatalf("rotation after burst %d: %v", i, err)
		}
		rotated := rotatedFiles(t, logPath)
		if len(rotated) > 0 && (len(rotatedBefore) == 0 || rotated[len(rotated)-1] != rotatedBefore[len(rotatedBefore)-1]) {
			rotations++
		}
		files, _ := onDisk(t, dir)
		if files > maxFiles {
			t.Errorf("after burst %d: %d files in the log directory, want <= %d", i, files, maxFiles)
		}
		if size := current(t, logPath); size >= maxSize {
			t.Errorf("after burst %d and a check: the current log has %d bytes, want < %d", i, size, maxSize)
		}
		for _, f := range rotated {
			if fi, err := os.Stat(f); err == nil && fi.Size() >= maxSize+framed {
				t.Errorf("after burst %d: rotated %s has %d bytes, want < max size + one burst (%d)", i, filepath.Base(f), fi.Size(), maxSize+framed)
			}
		}
	}
	if rotations < bursts/3 {
		t.Errorf("%d rotations for %d bursts of %d bytes with max size %d", rotations, bursts, framed, maxSize)
	}
	// The rotation passes called the runtime under their handler of
	// spec/callers.hcl only, ReopenContainerLog included.
	checkCallerAudit(t, rotCalls.Records(), fsm.LogRotationCallerName)
	if _, total := onDisk(t, dir); total >= int64(maxFiles)*(maxSize+framed) {
		t.Errorf("%d bytes on disk, want < max files × (max size + one burst) = %d", total, int64(maxFiles)*(maxSize+framed))
	}
	fcancel()

	// the end of the output spans the current file and the rotated ones
	tail := 2*lines + 2
	_, body := get(t, admin, fmt.Sprintf("%s?tailLines=%d", u, tail))
	want := strings.Repeat(line+"\n", lines) + fmt.Sprintf("burst %d\n", bursts-1) + strings.Repeat(line+"\n", lines) + fmt.Sprintf("burst %d\n", bursts)
	if body != want {
		t.Errorf("tailLines=%d: %d bytes, want the last two bursts (%d bytes)", tail, len(body), len(want))
	}

	// the container exits and restarts: previous reads the old one's files
	if _, err := n.rt.ExecSync(ctx, id, []string{"touch", "/tmp/stop"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	n.waitFor(t, "the writer restarted", func() bool {
		s := n.status("writer")
		return s != nil && len(s.Status.ContainerStatuses) == 1 && s.Status.ContainerStatuses[0].RestartCount >= 1 &&
			s.Status.ContainerStatuses[0].State.Running != nil
	})
	_, body = get(t, admin, fmt.Sprintf("%s?previous=true&tailLines=%d", u, tail+1))
	if want := want + "bye\n"; body != want {
		t.Errorf("previous, tailLines=%d: %d bytes, want the last two bursts and bye (%d bytes)", tail+1, len(body), len(want))
	}
}

// runningContainer returns the ID and log path of a pod's running container.
func runningContainer(t *testing.T, n *node, pod string) (id, logPath string) {
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
			if st.FinishedAt == 0 {
				return c.Id, st.LogPath
			}
		}
	}
	t.Fatalf("no running container of pod %s", pod)
	return "", ""
}

// current is the size of the current log file (0 when not there).
func current(t *testing.T, path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// rotatedFiles lists the rotated files of a log, oldest first.
func rotatedFiles(t *testing.T, path string) []string {
	m, err := filepath.Glob(path + ".*")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
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
