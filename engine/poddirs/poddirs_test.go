package poddirs

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func dirs(t *testing.T, paths ...string) Dirs {
	t.Helper()
	root := t.TempDir()
	for _, p := range paths {
		if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return Dirs{Root: root, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// List names every UID with a pod directory or a log directory, with the
// names of its log directories in name order; a log directory whose name
// has no UID part is not a pod's.
func TestList(t *testing.T) {
	d := dirs(t, "pods/u1/volumes", "pods/u2", "logs/ns_b_u1", "logs/ns_a_u1", "logs/ns_c_u3", "logs/stray")
	got := d.List()
	want := Listing{"u1": {"ns_a_u1", "ns_b_u1"}, "u2": nil, "u3": {"ns_c_u3"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("List() = %v, want %v", got, want)
	}
	if got := (Dirs{Root: filepath.Join(d.Root, "none")}).List(); len(got) != 0 {
		t.Errorf("List of a missing root = %v, want empty", got)
	}
}

// Remove takes the pod's directory and the log directories it is given,
// or, given nil, those <root>/logs holds for the UID; other pods' stay.
func TestRemove(t *testing.T) {
	d := dirs(t, "pods/u1/volumes/x", "pods/u2", "logs/ns_a_u1", "logs/ns_b_u1", "logs/ns_c_u2")
	d.Remove("u1", nil)
	for _, p := range []string{"pods/u1", "logs/ns_a_u1", "logs/ns_b_u1"} {
		if exists(filepath.Join(d.Root, p)) {
			t.Errorf("Remove(u1, nil): %s still there", p)
		}
	}
	for _, p := range []string{"pods/u2", "logs/ns_c_u2"} {
		if !exists(filepath.Join(d.Root, p)) {
			t.Errorf("Remove(u1, nil): %s of another pod removed", p)
		}
	}

	// Given the log directories, it removes those only.
	d = dirs(t, "pods/u1", "logs/ns_a_u1", "logs/ns_old_u1")
	d.Remove(types.UID("u1"), []string{filepath.Join(d.Root, "logs", "ns_a_u1")})
	if exists(filepath.Join(d.Root, "pods/u1")) || exists(filepath.Join(d.Root, "logs/ns_a_u1")) {
		t.Error("Remove(u1, [ns_a_u1]): the pod's directories are still there")
	}
	if !exists(filepath.Join(d.Root, "logs/ns_old_u1")) {
		t.Error("Remove(u1, [ns_a_u1]) removed a log directory it was not given")
	}

	// A UID with nothing on disk is no error.
	d.Remove("none", []string{})

	// RemoveListed takes what List found of the UID, and no other pod's.
	d = dirs(t, "pods/u1", "pods/u2", "logs/ns_a_u1", "logs/ns_c_u2")
	l := d.List()
	d.RemoveListed(l, "u1")
	if exists(filepath.Join(d.Root, "pods/u1")) || exists(filepath.Join(d.Root, "logs/ns_a_u1")) {
		t.Error("RemoveListed(u1): the pod's directories are still there")
	}
	if !exists(filepath.Join(d.Root, "pods/u2")) || !exists(filepath.Join(d.Root, "logs/ns_c_u2")) {
		t.Error("RemoveListed(u1) removed another pod's directories")
	}
}

func TestLogDirUID(t *testing.T) {
	for name, want := range map[string]types.UID{
		"default_web_1234-abcd":  "1234-abcd",
		"ns_name_with_under_uid": "uid",
		"noseparator":            "",
	} {
		if got := logDirUID(name); got != want {
			t.Errorf("logDirUID(%q) = %q, want %q", name, got, want)
		}
	}
}

// With a pod logs directory of its own, List and Remove read it (not
// <root>/logs), and removing a pod removes the links into its log
// directories, not another pod's or anything else in the links directory.
func TestRemoveLogsAndLinks(t *testing.T) {
	d := dirs(t, "pods/u1", "var/pods/ns_a_u1/app", "var/pods/ns_b_u2/app", "logs/ns_x_u9")
	d.LogsDir, d.LinksDir = filepath.Join(d.Root, "var/pods"), filepath.Join(d.Root, "var/containers")
	if got, want := d.List(), (Listing{"u1": {"ns_a_u1"}, "u2": {"ns_b_u2"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("List() = %v, want %v", got, want)
	}
	if err := os.MkdirAll(d.LinksDir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := func(name, target string) string {
		p := filepath.Join(d.LinksDir, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mine := link("a_ns_app-111111.log", filepath.Join(d.LogsDir, "ns_a_u1/app/0.log"))
	mine2 := link("a_ns_app-222222.log", filepath.Join(d.LogsDir, "ns_a_u1/app/1.log"))
	theirs := link("b_ns_app-333333.log", filepath.Join(d.LogsDir, "ns_b_u2/app/0.log"))
	prefix := link("a_ns_app-444444.log", filepath.Join(d.LogsDir, "ns_a_u1x/app/0.log"))
	d.Remove("u1", nil)
	for _, p := range []string{mine, mine2, filepath.Join(d.LogsDir, "ns_a_u1"), filepath.Join(d.Root, "pods/u1")} {
		if exists(p) {
			t.Errorf("Remove(u1): %s still there", p)
		}
	}
	for _, p := range []string{theirs, prefix, filepath.Join(d.LogsDir, "ns_b_u2"), filepath.Join(d.Root, "logs/ns_x_u9")} {
		if !exists(p) {
			t.Errorf("Remove(u1) removed %s", p)
		}
	}
}
