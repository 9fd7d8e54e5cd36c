package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestWebUIInChromium drives the /ui page in a real headless Chromium
// (Debian's package; `make test` installs it): the page lists the pod with
// its machines' states, shows its state change after the manifest is
// removed, and a screenshot is saved as a test artifact. Chromium runs
// with no network but loopback (background networking off).
func TestWebUIInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed (make deps installs it)")
		}
		t.Skip("chromium is not installed; run make deps as root")
	}
	dir := t.TempDir()
	manifests := filepath.Join(dir, "pods")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(manifests, "web.yaml")
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers: [{name: main, image: 'busybox:latest'}]\n"
	if err := os.WriteFile(manifest, []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	o, err := parseRunFlags([]string{"--runtime=sim", "--root-dir", filepath.Join(dir, "root"), "--pod-manifest-path", manifests,
		"--node-name", "n1", "--read-only-port", fmt.Sprint(port), "--healthz-port", "0", "--port", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runDaemon(ctx, o, io.Discard) }()
	defer func() {
		cancel()
		<-done
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	browse := func(args ...string) string {
		t.Helper()
		profile := t.TempDir()
		cmd := exec.Command(chromium, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
			"--user-data-dir=" + profile, "--virtual-time-budget=4000", "--window-size=1400,900"}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v: %v", args, err)
		}
		return string(out)
	}
	// The pod's row: its phase and each machine's state, as the page's
	// script renders them from /debug/pods.
	row := regexp.MustCompile(`<tr class="pod[^"]*" data-uid="[^"]+" id="pod-web-n1"><td>default/web-n1</td><td class="phase">([^<]*)</td><td class="state pod-state">([^<]*)</td><td class="state">([^<]*)</td><td class="state">([^<]*)</td>`)
	var m []string
	for deadline := time.Now().Add(60 * time.Second); ; {
		dom := browse("--dump-dom", base+"/ui")
		if m = row.FindStringSubmatch(dom); m != nil && m[1] == "Running" && m[2] == "synced" && m[4] == "main=running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed web-n1 Running (synced, main=running); last row %q; page:\n%.3000s", m, dom)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// A pod's detail (a click, or the #pod= link): each machine on its
	// live graph and the transitions that led there.
	dom := browse("--dump-dom", base+"/ui#pod=web-n1")
	for _, want := range []string{
		`src="/spec/graph?format=svg&amp;machine=pod&amp;pod=`,
		`src="/spec/graph?format=svg&amp;machine=container&amp;pod=`,
		`>container/main: running<`,
		`pending -update-&gt; syncing`,
		`waiting -start [pull_always]-&gt; pulling`, // busybox:latest: imagePullPolicy Always
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the detail of web-n1 lacks %q:\n%.4000s", want, dom)
		}
	}
	shot := filepath.Join(t.ArtifactDir(), "ui.png")
	browse("--screenshot="+shot, base+"/ui#pod=web-n1")
	if st, err := os.Stat(shot); err != nil || st.Size() < 1000 {
		t.Errorf("screenshot %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)

	// Kill the pod (its manifest goes): the page follows its machines to
	// the end.
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		dom := browse("--dump-dom", base+"/ui")
		m = row.FindStringSubmatch(dom)
		if m != nil && strings.HasSuffix(m[1], "(gone)") && m[2] == "finished" && m[3] == "removed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the manifest was removed the page never showed web-n1 gone (finished, sandbox removed); last row %q", m)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
