package volume

import (
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
)

// CheckHostPath applies a hostPath volume's type as kubelet does before
// the volume is used: the *OrCreate types create what is missing
// (DirectoryOrCreate with its parents, mode 0755; FileOrCreate an empty
// file, mode 0644, but not its parent), the others require an existing
// object of that kind; "" (or no type) checks nothing. The errors are
// kubelet's.
func CheckHostPath(path string, typ *v1.HostPathType) error {
	t := v1.HostPathUnset
	if typ != nil {
		t = *typ
	}
	fi, statErr := os.Stat(path)
	exists := statErr == nil
	is := func(m os.FileMode) bool { return exists && fi.Mode().Type()&m != 0 }
	switch t {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return fmt.Errorf("hostPath type check failed: create directory %s: %w", path, err)
			}
			return nil
		}
		fallthrough
	case v1.HostPathDirectory:
		if !exists || !fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", path)
		}
	case v1.HostPathFileOrCreate:
		if !exists {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return fmt.Errorf("hostPath type check failed: create file %s: %w", path, err)
			}
			return f.Close()
		}
		fallthrough
	case v1.HostPathFile:
		if !exists || !fi.Mode().IsRegular() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", path)
		}
	case v1.HostPathSocket:
		if !is(os.ModeSocket) {
			return fmt.Errorf("hostPath type check failed: %s is not a socket file", path)
		}
	case v1.HostPathCharDev:
		if !is(os.ModeCharDevice) {
			return fmt.Errorf("hostPath type check failed: %s is not a character device", path)
		}
	case v1.HostPathBlockDev:
		if !exists || fi.Mode().Type() != os.ModeDevice {
			return fmt.Errorf("hostPath type check failed: %s is not a block device", path)
		}
	default:
		return fmt.Errorf("hostPath type check failed: %q is not a valid hostPath type", t)
	}
	return nil
}
