package volume

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSetOwnership: files and directories take the group and the mask,
// directories setgid; a symbolic link's target keeps its mode.
func TestSetOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another group needs root")
	}
	for _, tc := range []struct {
		readOnly          bool
		file, dir, target os.FileMode
	}{
		{readOnly: true, file: 0o440, dir: os.ModeSetgid | 0o750, target: 0o600},
		{readOnly: false, file: 0o660, dir: os.ModeSetgid | 0o770, target: 0o600},
	} {
		dir := t.TempDir()
		sub := filepath.Join(dir, "sub")
		must(t, os.Mkdir(sub, 0o700))
		must(t, os.WriteFile(filepath.Join(sub, "f"), nil, 0o400))
		outside := filepath.Join(t.TempDir(), "target")
		must(t, os.WriteFile(outside, nil, 0o600))
		must(t, os.Symlink(outside, filepath.Join(dir, "link")))
		must(t, SetOwnership(dir, 4321, tc.readOnly))
		check := func(p string, mode os.FileMode, gid uint32) {
			t.Helper()
			st, err := os.Lstat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode() & (os.ModePerm | os.ModeSetgid); got != mode {
				t.Errorf("readOnly=%v %s mode %v, want %v", tc.readOnly, p, got, mode)
			}
			if g := st.Sys().(*syscall.Stat_t).Gid; g != gid {
				t.Errorf("readOnly=%v %s gid %d, want %d", tc.readOnly, p, g, gid)
			}
		}
		check(filepath.Join(sub, "f"), tc.file, 4321)
		check(sub, tc.dir, 4321)
		check(outside, tc.target, 0)
		if st, _ := os.Lstat(filepath.Join(dir, "link")); st.Sys().(*syscall.Stat_t).Gid != 4321 {
			t.Errorf("the link itself is not in the group")
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
