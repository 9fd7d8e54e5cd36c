package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/speclet/speclet/engine/devicemanager"
	"github.com/speclet/speclet/engine/podresources"
)

// runSim runs the daemon on the simulated runtime under root with args
// and no servers, returning its start error (nil when it started, and so
// ran until the bound of a minute).
func runSim(t *testing.T, root string, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o, err := parseRunFlags(append([]string{"--runtime=sim", "--root-dir", root, "--node-name", "n1", "--read-only-port", "0",
		"--healthz-port", "0", "--port", "0"}, args...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return runDaemon(ctx, o, io.Discard)
}

// longDir is a directory under base whose path is n bytes.
func longDir(base string, n int) string {
	return filepath.Join(base, strings.Repeat("d", n-len(base)-1))
}

// As kubelet's (its container manager fails to start, and kubelet exits),
// a device-plugin manager that cannot make its directory or its socket
// stops the start, with an error naming the socket and the flag.
func TestRunDaemonDevicePluginsSocket(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	long := longDir(base, maxSocketPath-len(devicemanager.SocketName)) // its socket one byte too long
	for _, c := range []struct{ dir, want string }{
		{file, "not a directory"},
		{long, "a unix socket's longest is 107"},
	} {
		sock := filepath.Join(c.dir, devicemanager.SocketName)
		err := runSim(t, filepath.Join(t.TempDir(), "root"), "--device-plugins-dir", c.dir)
		if err == nil || !strings.Contains(err.Error(), "device-plugin registration socket "+sock) ||
			!strings.Contains(err.Error(), "--device-plugins-dir") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("runDaemon with --device-plugins-dir %s = %v, want an error naming %s, the flag and %q", c.dir, err, sock, c.want)
		}
	}
}

// A --root-dir too long for the pod-resources socket stops the start, as
// kubelet exits when it cannot make it, with an error naming the socket;
// a --root-dir whose socket is a unix socket's longest runs.
func TestRunDaemonPodResourcesSocketLength(t *testing.T) {
	base := t.TempDir()
	if len(base) > 50 {
		b, err := os.MkdirTemp("/tmp", "sl")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(b) })
		base = b
	}
	plugins := filepath.Join(base, "dp")
	rel := len(podresources.SocketPath("/")) // "/pod-resources/kubelet.sock", joined to the root
	root := longDir(base, maxSocketPath+1-rel)
	err := runSim(t, root, "--device-plugins-dir", plugins)
	if sock := podresources.SocketPath(root); err == nil || !strings.Contains(err.Error(), sock) || !strings.Contains(err.Error(), "--root-dir") {
		t.Errorf("runDaemon with a %d-byte pod-resources socket path = %v, want an error naming %s and --root-dir", len(podresources.SocketPath(root)), err, sock)
	}

	ctx, cancel := context.WithCancel(context.Background())
	root = longDir(base, maxSocketPath-rel)
	o, err := parseRunFlags([]string{"--runtime=sim", "--root-dir", root, "--node-name", "n1", "--read-only-port", "0",
		"--healthz-port", "0", "--port", "0", "--device-plugins-dir", plugins}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- runDaemon(ctx, o, io.Discard) }()
	waitSocket(t, podresources.SocketPath(root), done)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("runDaemon with a %d-byte pod-resources socket path: %v", len(podresources.SocketPath(root)), err)
	}
}

// waitSocket waits for a socket at path while the daemon runs (its end,
// on done, fails the test).
func waitSocket(t *testing.T, path string, done chan error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("the daemon ended before %s was made: %v", path, err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket at %s", path)
		}
	}
}
