package volume

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readVolume(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		top, err := filepath.EvalSymlinks(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		err = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := os.Stat(p)
			if err != nil || fi.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rel, _ := filepath.Rel(top, p)
			out[filepath.Join(e.Name(), rel)] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// The writer's layout is kubelet's: a timestamped directory, ..data
// pointing at it, and one symlink per top-level name through ..data. An
// update swaps ..data, drops names that left the payload and the old
// directory; an unchanged payload changes nothing.
func TestAtomicWriterLayoutAndUpdate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := AtomicWriter{Dir: dir, Now: func() time.Time { return clock }}
	if err := w.Write(map[string]File{
		"a":         {Data: []byte("one"), Mode: 0o644},
		"sub/b":     {Data: []byte("two"), Mode: 0o600},
		"gone-soon": {Data: []byte("x"), Mode: 0o644},
	}); err != nil {
		t.Fatal(err)
	}
	ts1, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatalf("..data: %v", err)
	}
	if !strings.HasPrefix(ts1, "..2026_01_02_03_04_05.") {
		t.Errorf("..data -> %q, want a ..2026_01_02_03_04_05.* directory", ts1)
	}
	for _, name := range []string{"a", "sub", "gone-soon"} {
		if l, err := os.Readlink(filepath.Join(dir, name)); err != nil || l != filepath.Join("..data", name) {
			t.Errorf("%s -> %q (%v), want ..data/%s", name, l, err, name)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "sub", "b"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("sub/b mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if got := readVolume(t, dir); got["a"] != "one" || got["sub/b"] != "two" || len(got) != 3 {
		t.Errorf("volume holds %v", got)
	}

	// Unchanged: nothing is rewritten.
	if err := w.Write(map[string]File{"a": {Data: []byte("one"), Mode: 0o644}, "sub/b": {Data: []byte("two"), Mode: 0o600}, "gone-soon": {Data: []byte("x"), Mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	if ts, _ := os.Readlink(filepath.Join(dir, "..data")); ts != ts1 {
		t.Errorf("an unchanged payload swapped ..data to %q", ts)
	}

	// Update: new content, a file removed.
	clock = clock.Add(time.Minute)
	if err := w.Write(map[string]File{"a": {Data: []byte("ONE"), Mode: 0o644}, "sub/b": {Data: []byte("two"), Mode: 0o600}}); err != nil {
		t.Fatal(err)
	}
	ts2, _ := os.Readlink(filepath.Join(dir, "..data"))
	if ts2 == ts1 {
		t.Fatalf("update did not swap ..data")
	}
	if _, err := os.Lstat(filepath.Join(dir, ts1)); !os.IsNotExist(err) {
		t.Errorf("old directory %s still there (%v)", ts1, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "gone-soon")); !os.IsNotExist(err) {
		t.Errorf("symlink of a removed key still there (%v)", err)
	}
	if got := readVolume(t, dir); got["a"] != "ONE" || len(got) != 2 {
		t.Errorf("after update the volume holds %v", got)
	}
}

func TestAtomicWriterRejectsBadPaths(t *testing.T) {
	for _, p := range []string{"", "/abs", "../up", "a/../../b", "..hidden"} {
		w := AtomicWriter{Dir: t.TempDir()}
		if err := w.Write(map[string]File{p: {Data: []byte("x"), Mode: 0o644}}); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
}

// subPath stays inside its volume: ".." and absolute paths are refused, a
// symlink leading out is refused, a missing directory is created.
func TestSubPath(t *testing.T) {
	vol := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(vol, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	base, _ := filepath.EvalSymlinks(vol)
	for _, tc := range []struct {
		sub, want, err string
	}{
		{sub: "file", want: filepath.Join(base, "file")},
		{sub: "new/dir", want: filepath.Join(base, "new/dir")},
		{sub: "../x", err: "must not contain '..'"},
		{sub: "/etc", err: "must be a relative path"},
		{sub: "escape", err: "leaves the volume"},
	} {
		got, err := SubPath(vol, tc.sub)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("SubPath(%q) = %q, %v; want error %q", tc.sub, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("SubPath(%q) = %q, %v; want %q", tc.sub, got, err, tc.want)
		}
	}
	if fi, err := os.Stat(filepath.Join(vol, "new/dir")); err != nil || !fi.IsDir() {
		t.Errorf("subPath directory not created: %v", err)
	}
}
