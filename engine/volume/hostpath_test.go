package volume

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Each hostPath type against each kind of object, with kubelet's errors.
func TestCheckHostPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	missing := filepath.Join(dir, "missing")
	const null = "/dev/null" // a character device on every Linux
	typ := func(t v1.HostPathType) *v1.HostPathType { return &t }
	for _, tc := range []struct {
		path string
		typ  *v1.HostPathType
		err  string
	}{
		{path: missing, typ: nil},
		{path: missing, typ: typ(v1.HostPathUnset)},
		{path: dir, typ: typ(v1.HostPathDirectory)},
		{path: file, typ: typ(v1.HostPathDirectory), err: "is not a directory"},
		{path: missing, typ: typ(v1.HostPathDirectory), err: "is not a directory"},
		{path: file, typ: typ(v1.HostPathDirectoryOrCreate), err: "is not a directory"},
		{path: file, typ: typ(v1.HostPathFile)},
		{path: dir, typ: typ(v1.HostPathFile), err: "is not a file"},
		{path: missing, typ: typ(v1.HostPathFile), err: "is not a file"},
		{path: dir, typ: typ(v1.HostPathFileOrCreate), err: "is not a file"},
		{path: filepath.Join(missing, "f"), typ: typ(v1.HostPathFileOrCreate), err: "create file"},
		{path: sock, typ: typ(v1.HostPathSocket)},
		{path: file, typ: typ(v1.HostPathSocket), err: "is not a socket file"},
		{path: null, typ: typ(v1.HostPathCharDev)},
		{path: file, typ: typ(v1.HostPathCharDev), err: "is not a character device"},
		{path: null, typ: typ(v1.HostPathBlockDev), err: "is not a block device"},
		{path: dir, typ: typ("Bogus"), err: "not a valid hostPath type"},
	} {
		err := CheckHostPath(tc.path, tc.typ)
		name := "<nil>"
		if tc.typ != nil {
			name = string(*tc.typ)
		}
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("CheckHostPath(%s, %q) = %v, want error containing %q", tc.path, name, err, tc.err)
		}
		if tc.err != "" && err != nil && !strings.HasPrefix(err.Error(), "hostPath type check failed: ") {
			t.Errorf("error %q lacks kubelet's prefix", err)
		}
	}
	// The *OrCreate types create what is missing.
	newDir := filepath.Join(dir, "a", "b")
	if err := CheckHostPath(newDir, typ(v1.HostPathDirectoryOrCreate)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(newDir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755&^umask() {
		t.Errorf("DirectoryOrCreate made %v (%v)", fi, err)
	}
	newFile := filepath.Join(dir, "new-file")
	if err := CheckHostPath(newFile, typ(v1.HostPathFileOrCreate)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(newFile); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("FileOrCreate made %v (%v)", fi, err)
	}
	// A block device, when the machine has one to look at.
	if ents, _ := filepath.Glob("/dev/loop[0-9]*"); len(ents) > 0 {
		if err := CheckHostPath(ents[0], typ(v1.HostPathBlockDev)); err != nil {
			t.Errorf("BlockDevice %s: %v", ents[0], err)
		}
		if err := CheckHostPath(ents[0], typ(v1.HostPathCharDev)); err == nil {
			t.Errorf("CharDevice accepted block device %s", ents[0])
		}
	}
}

func umask() os.FileMode {
	dir, _ := os.MkdirTemp("", "umask")
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "d")
	os.Mkdir(p, 0o777)
	fi, _ := os.Stat(p)
	return 0o777 &^ fi.Mode().Perm()
}
