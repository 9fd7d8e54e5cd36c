package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/speclet/speclet/cri/mountinfo"
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
// The mount's root keeps the mode of a fresh tmpfs, 1777 (sticky,
// writable by all), as under kubelet, whose medium Memory emptyDir (and
// the secret and projected volumes it wraps) is a tmpfs mounted without a
// mode over a 0777 directory; the fsGroup's bits (SetOwnership) add to it.
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
	return nil
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) { return mountinfo.Under(dir) }

// UnmountAll unmounts every mount at or below dir, deepest first. A mount
// that is already gone counts as unmounted. Without dir nothing can be
// mounted there, and the mount table is not read.
func UnmountAll(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
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
