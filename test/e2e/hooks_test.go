package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/cri/harness"
)

// TestLifecycleHooks runs a pod whose postStart and preStop exec hooks write
// files into a hostPath directory of the test: the pod shows Running only
// after postStart wrote its file, and removing the manifest runs preStop
// (in the still running container) before the pod is gone.
func TestLifecycleHooks(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "hooks")
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	postStart := filepath.Join(dir, "poststart")
	preStop := filepath.Join(dir, "prestop")
	d.writeManifest(t, "hooks", hooksManifest(c, dir))

	runningEarly := false
	d.waitPod(t, "hooks", 2*time.Minute, "Running", func(p *v1.Pod) bool {
		if !isRunning(p) {
			return false
		}
		if _, err := os.Stat(postStart); err != nil {
			runningEarly = true
		}
		return true
	})
	if runningEarly {
		t.Errorf("the pod was Running before its postStart hook wrote %s", postStart)
	}
	if got := readFile(t, postStart); got != "started\n" {
		t.Errorf("postStart file = %q, want \"started\\n\"", got)
	}
	if _, err := os.Stat(preStop); err == nil {
		t.Errorf("preStop ran while the pod runs: %s exists", preStop)
	}

	d.removeManifest(t, "hooks")
	d.waitGone(t, "hooks", 2*time.Minute)
	if got := readFile(t, preStop); got != "stopping\n" {
		t.Errorf("preStop file = %q, want \"stopping\\n\"", got)
	}
	if got := readFile(t, postStart); got != "started\n" {
		t.Errorf("postStart file after removal = %q, want \"started\\n\"", got)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("read %s: %v", path, err)
	}
	return string(b)
}

// hooksManifest is a static pod with a hostPath volume dir at /out, a
// postStart hook that writes /out/poststart after a second (so a Running
// status published before the hook returned would be seen), and a preStop
// hook that writes /out/prestop.
func hooksManifest(c *harness.Containerd, dir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata:
  name: hooks
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 5
  volumes:
  - name: out
    hostPath:
      path: %s
  containers:
  - name: main
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", %q]
    volumeMounts:
    - name: out
      mountPath: /out
    lifecycle:
      postStart:
        exec:
          command: ["sh", "-c", "sleep 1; echo started > /out/poststart"]
      preStop:
        exec:
          command: ["sh", "-c", "echo stopping > /out/prestop"]
`, dir, c.ImageRef(harness.BusyboxRepo), handlesTERM)
	return b.String()
}
