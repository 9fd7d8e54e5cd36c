package containerlogs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The links log shippers tail (kubelet's /var/log/containers): one symbolic
// link per container instance to its log file. Rotation renames the old file
// and the runtime reopens one at the same path, so a link always names the
// current file.

// Link makes link a symbolic link to the log file target, in place of
// whatever was at link, and makes link's directory when it is missing. It
// makes nothing when target does not exist (made is false): a link to no
// file would only be swept away (kubelet makes none either). A link that
// already points at target is kept as it is.
func Link(link, target string) (made bool, err error) {
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return true, nil
	}
	if _, err := os.Stat(target); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	dir := filepath.Dir(link)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("log link %s: %w", link, err)
	}
	// A new link under a temporary name renamed over link: a reader sees
	// the old link or the new one, never none.
	tmp := filepath.Join(dir, "."+filepath.Base(link)+".new")
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return false, fmt.Errorf("log link %s: %w", link, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return false, fmt.Errorf("log link %s: %w", link, err)
	}
	return true, nil
}

// Unlink removes link; one that does not exist is no error.
func Unlink(link string) error {
	if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove log link: %w", err)
	}
	return nil
}

// SweepLinks removes the symbolic links *.log in dir whose target does not
// exist (kubelet's container GC of dead log links), except those keep
// reports: a running container's, whose file rotation may have renamed
// away for a moment. It returns the links it removed; a directory that does
// not exist has none. Nothing but dangling symbolic links is removed.
func SweepLinks(dir string, keep func(link string) bool) ([]string, error) {
	return RemoveLinks(dir, func(link, _ string) bool {
		if keep != nil && keep(link) {
			return false
		}
		_, err := os.Stat(link)
		return errors.Is(err, os.ErrNotExist) // its file exists (or cannot be told): kept
	})
}

// RemoveLinks removes the symbolic links *.log in dir (not the hidden ones
// Link makes on the way) for which remove, given the link's path and its
// target, reports true, and returns those it removed; a directory that
// does not exist has none. Nothing but symbolic links is removed.
func RemoveLinks(dir string, remove func(link, target string) bool) ([]string, error) {
	f, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("log links: %w", err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("log links: %w", err)
	}
	var removed []string
	var errs []error
	for _, n := range names {
		if !strings.HasSuffix(n, ".log") || strings.HasPrefix(n, ".") {
			continue
		}
		link := filepath.Join(dir, n)
		target, err := os.Readlink(link) // fails for anything but a symbolic link
		if err != nil || !remove(link, target) {
			continue
		}
		if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove log link: %w", err))
			continue
		}
		removed = append(removed, link)
	}
	return removed, errors.Join(errs...)
}
