// Package mountinfo reads the mount points of this process's mount
// namespace from /proc/self/mountinfo: what a pod's volumes left mounted
// (engine/volume) and what a containerd instance left under its directory
// (cri/harness).
package mountinfo

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Under lists the mount points at or below dir, longest path first, so
// that each comes before any mount it sits under (the order to unmount).
//
// The mount table is read once and kept: /proc/self/mountinfo stays open,
// and poll(2) on it reports (POLLPRI) any change of the mount namespace
// since the last poll, as findmnt --poll watches it, so the table is read
// again only after a mount or unmount. A change between a poll and the read
// it triggers is seen by the read or by the next poll.
func Under(dir string) ([]string, error) {
	points, err := table.current()
	if err != nil {
		return nil, err
	}
	return below(points, dir), nil
}

// table is this process's mount table, as of the last change poll saw.
var table mountTable

type mountTable struct {
	mu     sync.Mutex
	f      *os.File // /proc/self/mountinfo, open while the table is kept
	points []string
}

// current returns the mount points, read again when the namespace changed
// (or on the first call). The slice is never modified: a change makes a
// new one.
func (t *mountTable) current() ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f != nil && !t.changed() {
		return t.points, nil
	}
	if t.f == nil {
		// Opened blocking, so that os.NewFile keeps it out of the
		// runtime's netpoller: epoll would call the table's poll and take
		// the change before changed sees it.
		fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: "/proc/self/mountinfo", Err: err}
		}
		t.f = os.NewFile(uintptr(fd), "/proc/self/mountinfo")
	} else if _, err := t.f.Seek(0, io.SeekStart); err != nil {
		t.close()
		return nil, err
	}
	points, err := parse(t.f)
	if err != nil {
		t.close()
		return nil, err
	}
	t.points = points
	return points, nil
}

// changed polls the open table: true when the namespace changed since the
// last poll, or when poll fails (the table is then read again).
func (t *mountTable) changed() bool {
	fds := []unix.PollFd{{Fd: int32(t.f.Fd()), Events: unix.POLLPRI}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err != nil || n > 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0
	}
}

func (t *mountTable) close() {
	t.f.Close()
	t.f, t.points = nil, nil
}

// under lists the mount points of the table r at or below dir, longest
// first.
func under(r io.Reader, dir string) ([]string, error) {
	points, err := parse(r)
	if err != nil {
		return nil, err
	}
	return below(points, dir), nil
}

// parse reads the mount points of a mountinfo table, unescaped.
func parse(r io.Reader) ([]string, error) {
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
		out = append(out, unescape(string(raw)))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// below returns the points at or below dir, longest first.
func below(points []string, dir string) []string {
	dir = filepath.Clean(dir)
	sub := dir + "/"
	var out []string
	for _, mp := range points {
		if mp == dir || strings.HasPrefix(mp, sub) {
			out = append(out, mp)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// linePool holds the line buffers of parse: 4 KiB holds a mountinfo line;
// a longer one grows the scanner's buffer (up to 1 MiB) for that call only.
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
