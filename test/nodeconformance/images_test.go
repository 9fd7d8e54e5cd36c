package nodeconformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/speclet/speclet/cri/harness"
)

// TestNmeter: the images' nmeter, run by busybox's sh with busybox's
// applets only (as in the images), gives the suite's timestamp command
// (`date -u +%FT$(nmeter -d0 '%3t' | head -n1)Z`) a time that parses in the
// suite's format (RFC 3339 with milliseconds) and is now; any other use is
// refused.
func TestNmeter(t *testing.T) {
	bin := t.TempDir()
	for _, a := range []string{"sh", "adjtimex", "sed", "date", "printf", "head", "echo"} {
		if err := os.Symlink(harness.BusyboxPath, filepath.Join(bin, a)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "nmeter"), []byte(nmeterScript), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(script string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "sh"), "-c", script)
		cmd.Env = []string{"PATH=" + bin}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	before := time.Now().Add(-time.Second)
	out, err := run("echo `date -u +%FT$(nmeter -d0 '%3t' | head -n1)Z`")
	if err != nil {
		t.Fatalf("timestamp command: %v: %s", err, out)
	}
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\n$`).MatchString(out) {
		t.Fatalf("timestamp %q: not the suite's format", out)
	}
	ts, err := time.Parse(time.RFC3339, out[:len(out)-1])
	if err != nil {
		t.Fatal(err)
	}
	if ts.Before(before) || ts.After(time.Now().Add(time.Second)) {
		t.Errorf("timestamp %s is not now (%s)", ts, time.Now().UTC())
	}
	if out, err := run("nmeter '%t %c'"); err == nil {
		t.Errorf("nmeter '%%t %%c' succeeded: %s", out)
	}
}
