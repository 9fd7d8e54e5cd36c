// Package mountinfo reads the mount points of this process's mount
// namespace from /proc/self/mountinfo: what a pod's volumes left mounted
// (engine/volume) and what a containerd instance left under its directory
// (cri/harness).
package mountinfo

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Under lists the mount points at or below dir, longest path first, so
// that each comes before any mount it sits under (the order to unmount).
func Under(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return under(f, dir)
}

func under(r io.Reader, dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	sub := dir + "/"
	var out []string
	buf := linePool.Get().(*[]byte)
	defer linePool.Put(buf)
	sc := bufio.NewScanner(r)
	sc.Buffer((*buf)[:0], 1<<20)
	for sc.Scan() {
		raw, ok := field(sc.Bytes(), 4)
		if !ok {
			continue
		}
		if bytes.IndexByte(raw, '\\') >= 0 {
			if mp := unescape(string(raw)); mp == dir || strings.HasPrefix(mp, sub) {
				out = append(out, mp)
			}
		} else if string(raw) == dir || len(raw) > len(sub) && string(raw[:len(sub)]) == sub {
			out = append(out, string(raw))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// linePool holds the line buffers of under, which runs twice for every
// removed pod: 4 KiB holds a mountinfo line; a longer one grows the
// scanner's buffer (up to 1 MiB) for that call only.
var linePool = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// field returns the field with index n of a mountinfo line, split on spaces
// and tabs as strings.Fields splits it (whitespace in paths is escaped), and
// false when the line has fewer fields.
func field(line []byte, n int) ([]byte, bool) {
	i := 0
	for k := 0; ; k++ {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i == len(line) {
			return nil, false
		}
		j := i
		for j < len(line) && line[j] != ' ' && line[j] != '\t' {
			j++
		}
		if k == n {
			return line[i:j], true
		}
		i = j
	}
}

// unescape undoes the octal escapes (\040 for a space) of mountinfo paths.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
