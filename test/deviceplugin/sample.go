package deviceplugin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The sample plugin's constants (sampledeviceplugin.go).
const (
	// Resource is the extended resource the sample plugin serves.
	Resource = "example.com/resource"
	// pluginDir is where the plugin registers (pluginapi.DevicePluginPath)
	// and, with PLUGIN_SOCK_DIR set to it, serves its own socket.
	pluginDir = "/var/lib/kubelet/device-plugins"
)

// Devices are the sample plugin's devices, all healthy.
var Devices = []string{"Dev-1", "Dev-2"}

// DeviceFile is the host file the plugin's Allocate creates for device id
// and mounts at the same path in the container.
func DeviceFile(id string) string { return filepath.Join("/tmp", id) }

// namespaceScript runs in the plugin's own mount namespace (made private
// by the kernel's unshare, Go's CLONE_NEWNS): a tmpfs over /var/lib, the
// node's device-plugins directory ($1) bound where the plugin looks, then
// the plugin ($2) in the shell's place.
const namespaceScript = `set -e
mount -t tmpfs -o size=1m,mode=0755 speclet-sample-plugin /var/lib
mkdir -p ` + pluginDir + `
mount --bind "$1" ` + pluginDir + `
exec "$2"
`

// Sample is one running sample device plugin process.
type Sample struct {
	// LogPath is the plugin's output (klog).
	LogPath string

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the exit, once exited is closed
}

// StartSample starts the plugin bin for the device-plugins directory dir
// (a node's --device-plugins-dir: its registration socket kubelet.sock
// must be there, since the plugin registers at once and exits when it
// cannot), writing its output to logPath. It dies with the calling
// process.
func StartSample(bin, dir, logPath string) (*Sample, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if rel, err := filepath.Rel("/var/lib", dir); err == nil && !strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("start sample device plugin: %s is under /var/lib, which its mount namespace covers", dir)
	}
	if fi, err := os.Stat(filepath.Join(dir, "kubelet.sock")); err != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil, fmt.Errorf("start sample device plugin: no registration socket kubelet.sock in %s", dir)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start sample device plugin: %w", err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "==== sample device plugin start %s\n", time.Now().Format(time.RFC3339Nano))
	s := &Sample{LogPath: logPath, exited: make(chan struct{})}
	s.cmd = exec.Command("/bin/sh", "-c", namespaceScript, "sh", dir, bin)
	s.cmd.Env = append(os.Environ(), "PLUGIN_SOCK_DIR="+pluginDir)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sample device plugin: %w", err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	return s, nil
}

// Exited reports whether the process has ended, and how.
func (s *Sample) Exited() (bool, error) {
	select {
	case <-s.exited:
		return true, s.err
	default:
		return false, nil
	}
}

// Kill ends the plugin with SIGKILL (nothing of it runs: no Stop of its
// server, no goodbye) and waits for it.
func (s *Sample) Kill() {
	if s == nil || s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// DeviceFilesCleanup returns what removes the device files that do not
// exist now: those the Allocate of a plugin started after will make.
func DeviceFilesCleanup() func() error {
	var absent []string
	for _, id := range Devices {
		if _, err := os.Lstat(DeviceFile(id)); errors.Is(err, os.ErrNotExist) {
			absent = append(absent, DeviceFile(id))
		}
	}
	return func() error {
		var errs []error
		for _, f := range absent {
			if err := os.RemoveAll(f); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
}

// Log is the plugin's output so far.
func (s *Sample) Log() string {
	b, _ := os.ReadFile(s.LogPath)
	return string(b)
}
