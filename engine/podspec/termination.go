package podspec

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Limits of a termination message, as kubelet's: at most
// MaxTerminationMessageBytes of the message file (its end), or, under
// FallbackToLogsOnError, the last MaxTerminationLogBytes of the last
// MaxTerminationLogLines lines of the container's log.
const (
	MaxTerminationMessageBytes = 4 << 10
	MaxTerminationLogBytes     = 2 << 10
	MaxTerminationLogLines     = 80
)

// ContainerDir is the directory of a container's own files under root:
// <root>/pods/<uid>/containers/<name>. It goes with the pod's directory.
func ContainerDir(root string, pod *v1.Pod, name string) string {
	return filepath.Join(root, "pods", string(pod.UID), "containers", name)
}

// terminationMount creates an empty file, writable by every user, for one
// instance of c under its ContainerDir and mounts it at the container's
// terminationMessagePath, where the container may write why it ended
// (kubelet's termination-log file). Each instance gets a file of its own.
// No path, or no root directory (a translation without a node, as in
// benchmarks): no mount.
func terminationMount(root string, pod *v1.Pod, c *v1.Container) (*runtimeapi.Mount, error) {
	if c.TerminationMessagePath == "" || root == "" {
		return nil, nil
	}
	if !path.IsAbs(c.TerminationMessagePath) {
		return nil, fieldErr(pod, c, "terminationMessagePath", fmt.Errorf("%q is not an absolute path", c.TerminationMessagePath))
	}
	dir := ContainerDir(root, pod, c.Name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fieldErr(pod, c, "terminationMessagePath", fmt.Errorf("create termination message file: %w", err))
	}
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fieldErr(pod, c, "terminationMessagePath", fmt.Errorf("create termination message file: %w", err))
	}
	host := filepath.Join(dir, hex.EncodeToString(id[:]))
	f, err := os.OpenFile(host, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		err = os.Chmod(host, 0o666) // whatever the umask
	}
	if err != nil {
		return nil, fieldErr(pod, c, "terminationMessagePath", fmt.Errorf("create termination message file: %w", err))
	}
	return &runtimeapi.Mount{HostPath: host, ContainerPath: path.Clean(c.TerminationMessagePath)}, nil
}

// TerminationMessage reads the message an exited instance of c wrote to its
// terminationMessagePath, from the host file of the mount at that path in
// the instance's status (mounts): its last MaxTerminationMessageBytes. The
// second result says the caller should use the container's log instead:
// the policy is FallbackToLogsOnError, the instance failed (a non-zero exit
// it ran to), and the file is empty or missing, as kubelet decides.
func TerminationMessage(c *v1.Container, mounts []*runtimeapi.Mount, exitCode int32, reason string) (string, bool) {
	fallback := c.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError &&
		exitCode != 0 && reason != "ContainerCannotRun"
	if c.TerminationMessagePath == "" {
		return "", fallback
	}
	want := path.Clean(c.TerminationMessagePath)
	for _, m := range mounts {
		if path.Clean(m.ContainerPath) != want {
			continue
		}
		data, err := readTail(m.HostPath, MaxTerminationMessageBytes)
		if errors.Is(err, os.ErrNotExist) {
			return "", fallback
		}
		if err != nil {
			return fmt.Sprintf("Error on reading termination log %s: %v", m.HostPath, err), false
		}
		return string(data), fallback && len(data) == 0
	}
	return "", fallback
}

// readTail reads at most max bytes from the end of the file at p.
func readTail(p string, max int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		if _, err := f.Seek(-max, io.SeekEnd); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, max))
}
