package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// recorder is a testing.TB whose cleanups and errors CheckLeaks's test
// runs and reads itself.
type recorder struct {
	testing.TB
	cleanups []func()
	errs     []string
}

func (r *recorder) Helper()          {}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.cleanups = nil
}

// TestCheckLeaks: a test that leaves a process it started, a mount under a
// checked directory, or a directory that must be gone fails with a message
// naming each; what it found is killed and unmounted afterwards. A test
// that leaves nothing passes, and a process running before the check began
// is not the test's. A check nested in another one leaves the processes
// to the outer one: a process that outlives the inner check but not the
// outer one is no leak.
func TestCheckLeaks(t *testing.T) {
	earlier := exec.Command("sleep", "600")
	if err := earlier.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { earlier.Process.Kill(); earlier.Wait() })

	clean := &recorder{TB: t}
	l := CheckLeaks(clean)
	l.Clean(t.TempDir())
	gone := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	l.Gone(gone)
	short := exec.Command("true")
	if err := short.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	clean.end()
	if len(clean.errs) != 0 {
		t.Errorf("a test that left nothing failed: %q", clean.errs)
	}

	outerRec, innerRec := &recorder{TB: t}, &recorder{TB: t}
	CheckLeaks(outerRec)
	CheckLeaks(innerRec)
	needed := exec.Command("sleep", "602")
	if err := needed.Start(); err != nil {
		t.Fatal(err)
	}
	innerRec.end()
	needed.Process.Kill()
	needed.Wait()
	outerRec.end()
	if len(innerRec.errs)+len(outerRec.errs) != 0 {
		t.Errorf("a process the outer check saw stopped was a leak: inner %q, outer %q", innerRec.errs, outerRec.errs)
	}

	leaky := &recorder{TB: t}
	l = CheckLeaks(leaky)
	kept := t.TempDir()
	l.Gone(kept) // it exists at the end: left
	child := exec.Command("sleep", "601")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- child.Wait() }()
	var mnt string
	if os.Geteuid() == 0 {
		mnt = filepath.Join(kept, "vol")
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	}
	leaky.end()
	msg := strings.Join(leaky.errs, "\n")
	wants := []string{
		"left behind at the end of the test",
		fmt.Sprintf("process %d: sleep 601", child.Process.Pid),
		"directory " + kept,
	}
	if mnt != "" {
		wants = append(wants, "mount "+mnt)
	}
	for _, want := range wants {
		if !strings.Contains(msg, want) {
			t.Errorf("the check's message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, fmt.Sprintf("process %d:", earlier.Process.Pid)) {
		t.Errorf("the check blames a process that ran before it began:\n%s", msg)
	}
	if err := <-waited; err == nil {
		t.Errorf("the leftover process was not killed")
	}
	if mnt != "" {
		if m := Mounts(kept); len(m) != 0 {
			t.Errorf("the leftover mount was not unmounted: %v", m)
		}
	}
}
