package containerlogs

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Link makes the links directory and a link that reads as the log file;
// it replaces a link to another file, and makes none to a file that does
// not exist.
func TestLink(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pods", "ns_p_u", "app", "0.log")
	writeFile(t, file, "line\n")
	link := filepath.Join(dir, "containers", "p_ns_app-abcdef.log")
	if made, err := Link(link, file); err != nil || !made {
		t.Fatalf("Link = %v, %v; want made", made, err)
	}
	if b, err := os.ReadFile(link); err != nil || string(b) != "line\n" {
		t.Errorf("read through the link: %q, %v", b, err)
	}
	// Again: kept as it is.
	if made, err := Link(link, file); err != nil || !made {
		t.Errorf("Link again = %v, %v", made, err)
	}
	other := filepath.Join(dir, "pods", "ns_p_u", "app", "1.log")
	writeFile(t, other, "other\n")
	if _, err := Link(link, other); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(link); got != other {
		t.Errorf("link after relinking points at %q, want %q", got, other)
	}
	gone := filepath.Join(dir, "containers", "p_ns_app-123456.log")
	if made, err := Link(gone, filepath.Join(dir, "nothing.log")); err != nil || made {
		t.Errorf("Link to a missing file = %v, %v; want nothing made", made, err)
	}
	if _, err := os.Lstat(gone); !os.IsNotExist(err) {
		t.Errorf("a link to a missing file was made: %v", err)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "containers", ".*")); len(names) != 0 {
		t.Errorf("temporary links left: %q", names)
	}
	if err := Unlink(link); err != nil {
		t.Fatal(err)
	}
	if err := Unlink(link); err != nil {
		t.Errorf("Unlink of a missing link: %v", err)
	}
}

// A links directory that cannot be made is an error naming the link.
func TestLinkUnwritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "0.log")
	writeFile(t, file, "x")
	block := filepath.Join(dir, "block")
	writeFile(t, block, "a file where the links directory should be")
	link := filepath.Join(block, "p_ns_app-abcdef.log")
	_, err := Link(link, file)
	if err == nil || !strings.Contains(err.Error(), link) {
		t.Errorf("Link under a file: %v, want an error naming %s", err, link)
	}
}

// SweepLinks removes the dangling links but those kept, and nothing else.
func TestSweepLinks(t *testing.T) {
	dir := t.TempDir()
	links := filepath.Join(dir, "containers")
	live := filepath.Join(dir, "live.log")
	writeFile(t, live, "x")
	mk := func(name, target string) string {
		p := filepath.Join(links, name)
		if err := os.MkdirAll(links, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	alive := mk("a_ns_c-111111.log", live)
	dead := mk("b_ns_c-222222.log", filepath.Join(dir, "gone.log"))
	rotating := mk("c_ns_c-333333.log", filepath.Join(dir, "rotating.log"))
	other := mk("d_ns_c-444444.txt", filepath.Join(dir, "gone.log"))
	plain := filepath.Join(links, "e_ns_c-555555.log")
	writeFile(t, plain, "not a link")
	removed, err := SweepLinks(links, func(l string) bool { return l == rotating })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(removed, []string{dead}) {
		t.Errorf("removed %q, want %q", removed, []string{dead})
	}
	for _, p := range []string{alive, rotating, other, plain} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	if removed, err := SweepLinks(filepath.Join(dir, "none"), nil); err != nil || len(removed) != 0 {
		t.Errorf("SweepLinks of a missing directory = %q, %v", removed, err)
	}
}
