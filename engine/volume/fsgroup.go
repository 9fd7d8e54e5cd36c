package volume

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// Volume ownership under the pod's fsGroup (kubelet's SetVolumeOwnership):
// each file and directory of an emptyDir, configMap, secret, downwardAPI or
// projected volume belongs to the group fsGroup; files become group
// readable (and writable in an emptyDir), directories setgid and group
// searchable, so that a non-root user in the group can use them. hostPath
// volumes are the node's and keep their ownership, as under kubelet.
const (
	rwMask   = os.FileMode(0o660)
	roMask   = os.FileMode(0o440)
	execMask = os.FileMode(0o110)
)

// fsGroup is the pod's spec.securityContext.fsGroup, or nil.
func fsGroup(pod *v1.Pod) *int64 {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	return pod.Spec.SecurityContext.FSGroup
}

// groupReadable adds the read-only mask to the modes of payload, so that
// the files written carry the modes SetOwnership leaves on them and a
// refresh of unchanged content finds them the same.
func groupReadable(payload map[string]File) {
	for p, f := range payload {
		f.Mode |= roMask
		payload[p] = f
	}
}

// SetOwnership gives everything under dir (symbolic links not followed) the
// group gid and adds the read-only or read-write mask to its mode, plus
// setgid and the search bits on directories.
func SetOwnership(dir string, gid int64, readOnly bool) error {
	mask := rwMask
	if readOnly {
		mask = roMask
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, int(gid)); err != nil {
			return fmt.Errorf("fsGroup: chown %s: %w", p, err)
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil // chmod would change the target
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m := info.Mode() | mask
		if d.IsDir() {
			m |= os.ModeSetgid | execMask
		}
		if err := os.Chmod(p, m); err != nil {
			return fmt.Errorf("fsGroup: chmod %s: %w", p, err)
		}
		return nil
	})
}
