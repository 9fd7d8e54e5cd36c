package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Packages are the Debian packages the harness needs, and Binaries the files
// they must provide: containerd and runc are Containerd16's; gcc, libc6-dev,
// pkg-config and libseccomp-dev build Containerd2's runc (cgo, seccomp;
// BuildRuntime).
var (
	Packages = []string{"containerd", "runc", "containernetworking-plugins", "busybox-static", "iproute2", "libseccomp-dev", "gcc", "libc6-dev", "pkg-config"}
	Binaries = []string{"/usr/bin/containerd", "/usr/bin/containerd-shim-runc-v2", "/usr/sbin/runc", CNIBinDir + "/bridge", CNIBinDir + "/host-local", CNIBinDir + "/loopback", BusyboxPath, "/usr/sbin/ip"}
)

// CNIBinDir is where containernetworking-plugins installs the CNI plugins.
const CNIBinDir = "/usr/lib/cni"

// aptLockPath serializes installs among harness users on this machine.
var aptLockPath = filepath.Join(os.TempDir(), "speclet-apt.lock")

// EnsurePackages installs the missing Packages with apt-get (as root),
// serialized with a file lock so that parallel test binaries do not fight over
// dpkg. It is idempotent and logs what it does to log (nil: discard). Without
// root it fails naming the missing packages.
func EnsurePackages(ctx context.Context, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	missing := missingPackages(ctx)
	if len(missing) == 0 {
		return checkBinaries()
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("install packages %s: not root; run as root or install them with apt-get", strings.Join(missing, " "))
	}
	lock, err := os.OpenFile(aptLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("install packages: open lock %s: %w", aptLockPath, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("install packages: lock %s: %w", aptLockPath, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	// Another process may have installed them while we waited for the lock.
	missing = missingPackages(ctx)
	if len(missing) == 0 {
		return checkBinaries()
	}
	fmt.Fprintf(log, "harness: installing Debian packages: %s\n", strings.Join(missing, " "))
	// Wait for a dpkg lock held by an apt run outside the harness instead of
	// failing at once.
	if err := apt(ctx, "-o", "DPkg::Lock::Timeout=300", "update", "-qq"); err != nil {
		return err
	}
	args := append([]string{"-o", "DPkg::Lock::Timeout=300", "install", "-y", "-qq", "--no-install-recommends"}, missing...)
	if err := apt(ctx, args...); err != nil {
		return err
	}
	if still := missingPackages(ctx); len(still) > 0 {
		return fmt.Errorf("install packages: still missing after apt-get install: %s", strings.Join(still, " "))
	}
	fmt.Fprintf(log, "harness: installed %s\n", strings.Join(missing, " "))
	return checkBinaries()
}

func missingPackages(ctx context.Context) []string {
	var missing []string
	for _, p := range Packages {
		out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Status}", p).Output()
		if err != nil || !strings.Contains(string(out), "install ok installed") {
			missing = append(missing, p)
		}
	}
	return missing
}

func checkBinaries() error {
	for _, b := range Binaries {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("check installed packages: %w", err)
		}
	}
	return nil
}

func apt(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	// The Debian containerd package may start a system containerd on install;
	// the harness neither uses nor touches it (see Options).
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, tail(out.String(), 2000))
	}
	return nil
}

// tail returns at most the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
