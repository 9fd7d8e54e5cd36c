package containerdtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/containerlogs"
)

// criLine is a line of a log file in the CRI format: the time, the stream,
// F (a full line) or P (partial), the text.
var criLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d) (stdout|stderr) [FP] (.*)$`)

// logLines are the stream and text of each CRI-format line of file; an
// error of t for a line that is not one.
func logLines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil || len(b) == 0 {
		// Not there yet, or made and not written yet (containerd 2.x
		// creates the file before the first line).
		return nil
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		m := criLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("%s: %q is not a CRI log line", file, l)
			continue
		}
		out = append(out, m[3]+" "+m[4])
	}
	return out
}

// TestContainerdLogPaths: a container's log is where kubelet's is,
// <pod-logs-dir>/<ns>_<pod>_<uid>/<container>/<restart>.log in the CRI
// format with what it printed, and the link log shippers tail,
// <links-dir>/<pod>_<ns>_<container>-<id>.log, reads it; a restart writes
// 1.log with a link of its own, which the log maintenance makes again after
// a restart of speclet and which reads the current file after a rotation;
// a pod log directory removed by hand while
// the pod runs is made again by the next start; removing the pod removes
// its log directory and its links.
func TestContainerdLogPaths(t *testing.T) {
	c, ctx := containerdFor(t, 3*time.Minute)
	tmp := t.TempDir()
	podLogs, links, out := filepath.Join(tmp, "pods"), filepath.Join(tmp, "containers"), filepath.Join(tmp, "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	// Instance n prints two lines and counts itself in /out/n; the first
	// exits at once, the others once the test creates /out/stop<n>.
	p := writesTo(shPod(c, "logger", v1.RestartPolicyAlways, 1, `n=$(cat /out/n 2>/dev/null || echo 0); echo $((n+1)) > /out/n
echo "out $n"; echo "err $n" >&2
[ "$n" = 0 ] && exit 1
while [ ! -e /out/stop$n ]; do sleep 0.1; done; exit 1`), out, nil)
	rt, e, updates := startPods(ctx, t, c, engine.Config{RootDir: filepath.Join(tmp, "root"), PodLogsDir: podLogs,
		ContainerLogLinksDir: links, CrashLoopBackOffBase: time.Second}, p)
	podDir := filepath.Join(podLogs, "default_logger_logger-uid")
	idOf := func(cid string) string { _, id, _ := strings.Cut(cid, "://"); return id }
	linkOf := func(id string) string { return filepath.Join(links, "logger_default_main-"+id+".log") } // kubelet's name

	// instance restarts runs with ID id: its log and its link
	checkInstance := func(restarts int, id string) {
		t.Helper()
		n := strconv.Itoa(restarts)
		file := filepath.Join(podDir, "main", n+".log")
		want := []string{"stdout out " + n, "stderr err " + n}
		waitFor(t, ctx, file+" with both lines", func() bool { return len(logLines(t, file)) == 2 }, e)
		got := logLines(t, file)
		if strings.Join(sortedPair(got), "|") != strings.Join(sortedPair(want), "|") {
			t.Errorf("%s: lines %q, want %q", file, got, want)
		}
		link := linkOf(id)
		target, err := os.Readlink(link)
		if err != nil || target != file {
			t.Errorf("link %s -> %q (%v), want -> %s", link, target, err, file)
		}
		b, err1 := os.ReadFile(link)
		f, err2 := os.ReadFile(file)
		if err1 != nil || err2 != nil || string(b) != string(f) {
			t.Errorf("read through link %s: %q, %v; the file has %q, %v", link, b, err1, f, err2)
		}
	}

	waitFor(t, ctx, "instance 1 running", func() bool {
		st := mainStatus(e, "logger")
		return st.RestartCount == 1 && st.State.Running != nil && st.LastTerminationState.Terminated != nil
	}, e)
	st := mainStatus(e, "logger")
	id0, id1 := idOf(st.LastTerminationState.Terminated.ContainerID), idOf(st.ContainerID)
	checkInstance(0, id0)
	checkInstance(1, id1)

	// After a restart of speclet the log maintenance links a running
	// container whose link went meanwhile; its rotation leaves the link
	// reading the current file.
	link1, file1 := linkOf(id1), filepath.Join(podDir, "main", "1.log")
	if err := os.Remove(link1); err != nil {
		t.Fatal(err)
	}
	rot := &containerlogs.Rotator{Runtime: rt, MaxSize: 10, MaxFiles: 5, LinkOf: engine.LogLinkOf(links), LinksDir: links}
	if err := rot.RotateOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(link1); err != nil || target != file1 {
		t.Errorf("after a maintenance pass, link %s -> %q (%v), want -> %s", link1, target, err, file1)
	}
	rotated, _ := filepath.Glob(file1 + ".*")
	if len(rotated) != 1 || len(logLines(t, rotated[0])) != 2 {
		t.Errorf("rotated files of %s: %q, want one with instance 1's two lines", file1, rotated)
	}
	if b, err := os.ReadFile(link1); err != nil || len(b) != 0 {
		t.Errorf("read through %s after rotation: %q, %v; want the new, empty file", link1, b, err)
	}

	// The pod's log directory removed by hand while instance 1 runs: the
	// next start makes what it needs.
	if err := os.RemoveAll(podDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "stop1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "instance 2 running", func() bool {
		st := mainStatus(e, "logger")
		return st.RestartCount == 2 && st.State.Running != nil
	}, e)
	id2 := idOf(mainStatus(e, "logger").ContainerID)
	checkInstance(2, id2)
	// Container GC removed instance 0 at instance 1's death, and its link.
	waitFor(t, ctx, "instance 0's link removed with it", gone(linkOf(id0)), e)

	removePods(updates, p)
	waitFor(t, ctx, "the pod's log directory and links removed", func() bool {
		names, _ := filepath.Glob(filepath.Join(links, "*"))
		_, err := os.Lstat(podDir)
		return len(e.Pods()) == 0 && os.IsNotExist(err) && len(names) == 0
	}, e)
}

// sortedPair orders two lines (a stdout and a stderr line race to the
// file).
func sortedPair(l []string) []string {
	if len(l) == 2 && l[0] > l[1] {
		return []string{l[1], l[0]}
	}
	return l
}

// TestContainerdReaddCountsRestarts: a static pod whose manifest is removed
// and written back while it terminates (the same UID) runs again once the
// old one finished, as a restart: its container reports restartCount 1 and
// writes 1.log beside the old 0.log, as kubelet counts on from the log
// files (e2e_node MirrorPod "should successfully recreate when file is
// removed and recreated").
func TestContainerdReaddCountsRestarts(t *testing.T) {
	c, ctx := containerdFor(t, 2*time.Minute)
	tmp := t.TempDir()
	podLogs := filepath.Join(tmp, "pods")
	p := shPod(c, "readd", v1.RestartPolicyAlways, 1, `echo run; exec sleep 3600`)
	_, e, updates := startPods(ctx, t, c, engine.Config{RootDir: filepath.Join(tmp, "root"), PodLogsDir: podLogs}, p)
	waitFor(t, ctx, "the first instance running", func() bool { return mainStatus(e, "readd").State.Running != nil }, e)
	removePods(updates, p)
	updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{p}, Source: config.SourceFile}
	waitFor(t, ctx, "the pod running again", func() bool {
		st := mainStatus(e, "readd")
		return st.State.Running != nil && st.RestartCount == 1
	}, e)
	dir := filepath.Join(podLogs, "default_readd_readd-uid", "main")
	for _, f := range []string{"0.log", "1.log"} {
		file := filepath.Join(dir, f)
		waitFor(t, ctx, file+" written", func() bool { return len(logLines(t, file)) == 1 }, e)
		if got := logLines(t, file); got[0] != "stdout run" {
			t.Errorf("%s: %q, want the instance's line", file, got)
		}
	}
	removePods(updates, p)
	waitFor(t, ctx, "the pod and its log directory removed", func() bool {
		_, err := os.Lstat(filepath.Dir(dir))
		return len(e.Pods()) == 0 && os.IsNotExist(err)
	}, e)
}
