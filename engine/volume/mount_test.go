package volume

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestUnmountAll: the mounts at and below a directory go, nested ones
// first; a directory that does not exist has nothing mounted and is no
// error.
func TestUnmountAll(t *testing.T) {
	if err := UnmountAll(filepath.Join(t.TempDir(), "gone")); err != nil {
		t.Errorf("UnmountAll of a missing directory = %v, want nil", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	outer := filepath.Join(dir, "volumes", "a")
	if err := os.MkdirAll(outer, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", outer, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	inner := filepath.Join(outer, "b")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", inner, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(inner, unix.MNT_DETACH); unix.Unmount(outer, unix.MNT_DETACH) })
	if err := UnmountAll(filepath.Join(dir, "volumes")); err != nil {
		t.Fatalf("UnmountAll: %v", err)
	}
	mps, err := mountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(mps) != 0 {
		t.Errorf("mounts left under %s: %v", dir, mps)
	}
}
