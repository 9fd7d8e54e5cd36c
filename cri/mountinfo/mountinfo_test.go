package mountinfo

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestUnder(t *testing.T) {
	const info = `22 1 252:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
101 22 0:50 / /tmp/spl/pods/u1/volumes/cache rw - tmpfs tmpfs rw
102 22 0:51 / /tmp/spl/pods/u1/volumes/with\040space rw - tmpfs tmpfs rw
103 101 0:52 / /tmp/spl/pods/u1/volumes/cache/sub rw - tmpfs tmpfs rw
104 22 0:53 / /tmp/spl-other rw - tmpfs tmpfs rw
105 22 0:54 / /tmp/spl rw - tmpfs tmpfs rw
`
	for _, c := range []struct {
		dir  string
		want []string
	}{
		{"/tmp/spl/pods/u1", []string{
			"/tmp/spl/pods/u1/volumes/with space",
			"/tmp/spl/pods/u1/volumes/cache/sub",
			"/tmp/spl/pods/u1/volumes/cache",
		}},
		// The directory itself counts; a sibling sharing its prefix does not.
		{"/tmp/spl/", []string{
			"/tmp/spl/pods/u1/volumes/with space",
			"/tmp/spl/pods/u1/volumes/cache/sub",
			"/tmp/spl/pods/u1/volumes/cache",
			"/tmp/spl",
		}},
		{"/nowhere", nil},
	} {
		got, err := under(strings.NewReader(info), c.dir)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("under(%q) = %q, want %q", c.dir, got, c.want)
		}
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/a\040b`:  "/a b",
		`/tab\011`: "/tab\t",
		`/plain`:   "/plain",
		`/bad\04`:  `/bad\04`, // too short to be an escape
		`/x\999y`:  `/x\999y`, // not octal
	} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestField(t *testing.T) {
	line := []byte("101 22\t0:50  / /mnt/x rw")
	for n, want := range []string{"101", "22", "0:50", "/", "/mnt/x", "rw"} {
		if got, ok := field(line, n); !ok || string(got) != want {
			t.Errorf("field %d = %q, %v; want %q", n, got, ok, want)
		}
	}
	if got, ok := field(line, 6); ok {
		t.Errorf("field 6 = %q, want none", got)
	}
	if _, ok := field([]byte("  "), 0); ok {
		t.Error("a blank line has a field")
	}
}

// BenchmarkUnder reads a 70-line mount table (this machine's size) for
// one pod's directory, as a pod's removal does twice.
func BenchmarkUnder(b *testing.B) {
	var sb strings.Builder
	for i := range 70 {
		fmt.Fprintf(&sb, "%d 22 0:%d / /var/lib/something/mount-point-%d rw,nosuid,nodev,noexec,relatime shared:%d - tmpfs tmpfs rw,size=65536k\n", 100+i, i, i, i)
	}
	info := sb.String()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := under(strings.NewReader(info), "/var/lib/speclet/pods/uid-p00001"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestUnderSeesMountChanges: the kept table follows the namespace: a mount
// made or removed between two calls shows in the second, each time.
func TestUnderSeesMountChanges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	mp := filepath.Join(dir, "a")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mp, unix.MNT_DETACH) })
	for round := range 3 {
		if got, err := Under(dir); err != nil || len(got) != 0 {
			t.Fatalf("round %d, before the mount: Under = %q, %v; want none", round, got, err)
		}
		if err := unix.Mount("tmpfs", mp, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount tmpfs: %v", err)
		}
		if got, err := Under(dir); err != nil || !reflect.DeepEqual(got, []string{mp}) {
			t.Fatalf("round %d, after the mount: Under = %q, %v; want [%s]", round, got, err, mp)
		}
		if err := unix.Unmount(mp, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkUnderKept is Under on this process's mount table while it does
// not change: one poll.
func BenchmarkUnderKept(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if _, err := Under(dir); err != nil {
			b.Fatal(err)
		}
	}
}
