package containerdtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine"
)

// TestContainerdTerminationMessage: a container that writes its
// terminationMessagePath (the default one, or another) and exits shows the
// file's content in its terminated state; under FallbackToLogsOnError a
// failed container with no message shows its log tail (the last 80 lines,
// at most 2 KiB), one with a message shows the message; under ReadFile a
// failed container without a message shows none. The message files go with
// the pod. (Before the file was mounted and read, every message was empty.)
func TestContainerdTerminationMessage(t *testing.T) {
	c, ctx := containerdFor(t, 3*time.Minute)
	mk := func(name, path string, policy v1.TerminationMessagePolicy, script string) *v1.Pod {
		p := shPod(c, name, v1.RestartPolicyNever, 1, script)
		p.Spec.Containers[0].TerminationMessagePath, p.Spec.Containers[0].TerminationMessagePolicy = path, policy
		return p
	}
	// 100 lines: the last 80 of the short ones, the last 2 KiB of the
	// long ones.
	var short, long strings.Builder
	for i := range 100 {
		fmt.Fprintf(&short, "line %d\n", i)
		fmt.Fprintf(&long, "%s line %d\n", strings.Repeat("x", 20), i)
	}
	want := map[string]string{
		"default":         "DONE",
		"custom":          "written elsewhere",
		"fallback-lines":  short.String()[strings.Index(short.String(), "line 20\n"):],
		"fallback-bytes":  long.String()[long.Len()-2048:],
		"fallback-file":   "from the file",
		"readfile-failed": "",
		"partial-line":    "DONE",
		"fallback-ok":     "",
	}
	pods := []*v1.Pod{
		mk("default", "/dev/termination-log", v1.TerminationMessageReadFile, `echo -n DONE > /dev/termination-log`),
		mk("custom", "/dev/termination-custom-log", v1.TerminationMessageReadFile, `echo -n written elsewhere > /dev/termination-custom-log; exit 4`),
		mk("fallback-lines", "/dev/termination-log", v1.TerminationMessageFallbackToLogsOnError,
			`i=0; while [ $i -lt 100 ]; do echo "line $i"; i=$((i+1)); done; exit 1`),
		mk("fallback-bytes", "/dev/termination-log", v1.TerminationMessageFallbackToLogsOnError,
			`i=0; while [ $i -lt 100 ]; do echo "xxxxxxxxxxxxxxxxxxxx line $i"; i=$((i+1)); done; exit 1`),
		mk("fallback-file", "/dev/termination-log", v1.TerminationMessageFallbackToLogsOnError, `echo log; echo -n from the file > /dev/termination-log; exit 1`),
		mk("readfile-failed", "/dev/termination-log", v1.TerminationMessageReadFile, `echo only a log; exit 1`),
		// The e2e specs' commands: a log without a final newline, and a
		// success, which never falls back to the log.
		mk("partial-line", "/dev/termination-log", v1.TerminationMessageFallbackToLogsOnError, `/bin/echo -n DONE; /bin/false`),
		mk("fallback-ok", "/dev/termination-log", v1.TerminationMessageFallbackToLogsOnError, `/bin/echo -n DONE; /bin/true`),
	}
	root := filepath.Join(t.TempDir(), "root")
	_, e, updates := startPods(ctx, t, c, engine.Config{RootDir: root}, pods...)
	terminated := func(name string) *v1.ContainerStateTerminated { return mainStatus(e, name).State.Terminated }
	for _, p := range pods {
		waitFor(t, ctx, p.Name+" terminated", func() bool { return terminated(p.Name) != nil }, e)
		if got := terminated(p.Name).Message; got != want[p.Name] {
			t.Errorf("%s: message %q, want %q", p.Name, got, want[p.Name])
		}
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "default-uid", "containers", "main")); err != nil {
		t.Errorf("message file directory: %v", err)
	}
	removePods(updates, pods...)
	waitFor(t, ctx, "pods removed with their files", func() bool {
		_, err := os.Stat(filepath.Join(root, "pods", "default-uid"))
		return len(e.Pods()) == 0 && os.IsNotExist(err)
	}, e)
}
