package podspec

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestEnsureDir: os.MkdirAll's outcome in every case.
func TestEnsureDir(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{
		filepath.Join(root, "new"),              // a new directory
		filepath.Join(root, "new"),              // the same, existing
		filepath.Join(root, "a", "b", "c"),      // missing parents
		filepath.Join(root, "a", "b", "c", "."), // existing, not clean
	} {
		if err := EnsureDir(dir, 0o750); err != nil {
			t.Fatalf("EnsureDir(%s): %v", dir, err)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("%s: not a directory after EnsureDir (%v)", dir, err)
		}
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := EnsureDir(file, 0o750); err == nil {
		t.Fatal("EnsureDir of a regular file: no error")
	}
	if err := EnsureDir(filepath.Join(file, "sub"), 0o750); err == nil {
		t.Fatal("EnsureDir under a regular file: no error")
	}
}

// TestWriteFileMode: the parent is made when missing, the content replaced
// and the mode set whatever the file had.
func TestWriteFileMode(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pod", "etc-hosts")
	if err := writeFileMode(file, []byte("first, longer\n"), 0o644, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeFileMode(file, []byte("second\n"), 0o644, 0o750); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil || string(b) != "second\n" {
		t.Fatalf("content %q, %v; want %q", b, err, "second\n")
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, %v; want 0644", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(filepath.Dir(file)); err != nil || fi.Mode().Perm() != 0o750&^umask(t) {
		t.Fatalf("directory mode %v, %v", fi.Mode().Perm(), err)
	}
}

func umask(t *testing.T) os.FileMode {
	dir := filepath.Join(t.TempDir(), "probe")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	return 0o777 &^ fi.Mode().Perm()
}

// TestNodeFileCache: a node file is read again after every kind of change
// a stat shows: its size, its modification time, another file renamed over
// it; and an error when it is gone.
func TestNodeFileCache(t *testing.T) {
	c := fileCache{m: map[string]cachedFile{}}
	dir := t.TempDir()
	path := filepath.Join(dir, "hosts")
	write := func(content string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(want string) {
		t.Helper()
		for range 2 { // read, then from the cache
			b, err := c.read(path)
			if err != nil || string(b) != want {
				t.Fatalf("read %q, %v; want %q", b, err, want)
			}
		}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write("127.0.0.1 a\n", t0)
	expect("127.0.0.1 a\n")
	write("127.0.0.1 bb\n", t0) // size
	expect("127.0.0.1 bb\n")
	write("127.0.0.1 cc\n", t0.Add(time.Second)) // modification time
	expect("127.0.0.1 cc\n")
	other := filepath.Join(dir, "hosts.new")
	if err := os.WriteFile(other, []byte("127.0.0.1 dd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(other, t0.Add(time.Second), t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil { // inode
		t.Fatal(err)
	}
	expect("127.0.0.1 dd\n")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := c.read(path); err == nil {
		t.Fatal("read of a removed file: no error")
	}
}
