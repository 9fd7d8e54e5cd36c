package volume

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// IsMountPoint reports whether dir is the root of a mount: its device
// differs from its parent's (kubelet's quick check; a bind mount of the
// same filesystem onto itself is not detected, and speclet makes none).
func IsMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, err
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev || st.Ino == parent.Ino, nil
}

// MountTmpfs makes dir (created if needed) a tmpfs limited to size bytes
// (0: the kernel's default, half of the memory), unless it is one already.
func MountTmpfs(dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return fmt.Errorf("create mount point: %w", err)
	}
	if mnt, err := IsMountPoint(dir); err != nil {
		return fmt.Errorf("check mount point: %w", err)
	} else if mnt {
		return nil
	}
	opts := ""
	if size > 0 {
		opts = "size=" + strconv.FormatInt(size, 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	// The mode of a fresh tmpfs root is 1777; kubelet's emptyDir is 0777.
	if err := os.Chmod(dir, 0o777); err != nil {
		return fmt.Errorf("chmod tmpfs %s: %w", dir, err)
	}
	return nil
}

// mountsUnder lists the mount points at or below dir from
// /proc/self/mountinfo, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of
// /proc/self/mountinfo paths.
func unescapeMountinfo(s string) string {
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

// UnmountAll unmounts every mount at or below dir, deepest first. A mount
// that is already gone counts as unmounted.
func UnmountAll(dir string) error {
	mps, err := mountsUnder(dir)
	if err != nil {
		return fmt.Errorf("list mounts under %s: %w", dir, err)
	}
	for _, mp := range mps {
		if err := unix.Unmount(mp, 0); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			return fmt.Errorf("unmount %s: %w", mp, err)
		}
	}
	return nil
}
