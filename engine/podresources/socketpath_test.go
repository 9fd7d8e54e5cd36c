package podresources

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rootOfSocketLen is a root dir under base whose socket path is n bytes.
func rootOfSocketLen(t *testing.T, base string, n int) string {
	t.Helper()
	short := len(SocketPath(filepath.Join(base, "r")))
	if n < short {
		t.Fatalf("base %s too long for a socket path of %d bytes", base, n)
	}
	root := filepath.Join(base, "r"+strings.Repeat("r", n-short))
	if got := len(SocketPath(root)); got != n {
		t.Fatalf("socket path of %d bytes, want %d", got, n)
	}
	return root
}

// A socket path of a unix socket's longest (107 bytes) holds the socket,
// its temporary name included (kubelet's, shorter than kubelet.sock); one
// byte more is an error naming the path and the flag to shorten.
func TestSocketPathLongest(t *testing.T) {
	base := t.TempDir()
	if len(base) > 60 {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "pr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	root := rootOfSocketLen(t, dir, maxPath)
	s, err := Listen(SocketPath(root), Config{Pods: podSet{}})
	if err != nil {
		t.Fatalf("Listen on a %d-byte path: %v, want the socket", maxPath, err)
	}
	go s.Serve()
	if fi, err := os.Stat(SocketPath(root)); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("%s after Listen: %v, %v; want a socket", SocketPath(root), fi, err)
	}
	s.Stop(5 * time.Second)

	root = rootOfSocketLen(t, dir, maxPath+1)
	_, err = Listen(SocketPath(root), Config{Pods: podSet{}})
	if err == nil || !strings.Contains(err.Error(), SocketPath(root)) || !strings.Contains(err.Error(), "--root-dir") {
		t.Errorf("Listen on a %d-byte path: %v, want an error naming it and --root-dir", maxPath+1, err)
	}
	if _, err := os.Stat(filepath.Dir(SocketPath(root))); err == nil {
		t.Errorf("the refused path's directory %s was made", filepath.Dir(SocketPath(root)))
	}
}
