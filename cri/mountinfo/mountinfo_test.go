package mountinfo

import (
	"reflect"
	"strings"
	"testing"
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
