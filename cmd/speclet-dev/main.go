// Command speclet-dev runs speclet on a private containerd for development:
// it is what `make run` starts.
//
// It installs containerd, runc, the CNI plugins and busybox-static when they
// are missing (as root, with apt-get), serves the busybox and pause images
// from a registry on a fixed loopback address (so manifests can say
// 127.0.0.1:5000/busybox:latest), starts a project-local containerd, and runs
// `speclet run` on it with the manifests of --pod-manifest-path. Ctrl-C (or
// SIGTERM) stops speclet, then removes every pod and stops containerd and the
// registry, leaving nothing behind.
//
// Usage:
//
//	speclet-dev --speclet bin/speclet --pod-manifest-path examples/pods [--registry-addr 127.0.0.1:5000] [-- speclet run flags]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/speclet/speclet/cri/harness"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("speclet-dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	speclet := fs.String("speclet", "", "the speclet binary (default: speclet beside this program)")
	registryAddr := fs.String("registry-addr", "127.0.0.1:5000", "loopback address of the image registry the example pods pull from")
	manifests := fs.String("pod-manifest-path", "examples/pods", "directory of static pod manifests")
	port := fs.Int("read-only-port", 10255, "speclet's read-only HTTP port")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "speclet-dev: "+format+"\n", a...) }
	if os.Geteuid() != 0 {
		say("needs root: it installs Debian packages and runs containerd, which runs containers.")
		say("Run `sudo make run`, or without root try the simulated runtime (no real containers):")
		say("  go run ./cmd/speclet run --runtime=sim --root-dir $HOME/.cache/speclet --pod-manifest-path %s", *manifests)
		return 1
	}
	if *speclet == "" {
		self, err := os.Executable()
		if err != nil {
			say("find speclet: %v (give --speclet)", err)
			return 2
		}
		*speclet = filepath.Join(filepath.Dir(self), "speclet")
	}
	if _, err := os.Stat(*speclet); err != nil {
		say("--speclet: %v", err)
		return 2
	}
	manifestDir, err := filepath.Abs(*manifests)
	if err != nil {
		say("--pod-manifest-path: %v", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logw := prefixWriter{w: stderr, prefix: "speclet-dev: "}
	if err := harness.EnsurePackages(ctx, logw); err != nil {
		say("install packages: %v", err)
		return 1
	}
	harness.ReapStale(func(format string, a ...any) { say(format, a...) })
	reg, err := harness.StartRegistry(*registryAddr)
	if err != nil {
		say("start registry on %s (--registry-addr): %v", *registryAddr, err)
		return 1
	}
	defer reg.Close()
	if err := reg.PushDefaults(ctx); err != nil {
		say("push images to %s: %v", reg.Addr, err)
		return 1
	}
	say("registry on %s holds %s and %s", reg.Addr, reg.Ref(harness.BusyboxRepo), reg.Ref(harness.PauseRepo))
	c, err := harness.StartContainerd(ctx, harness.Options{Registry: reg, Log: logw})
	if err != nil {
		say("start containerd: %v", err)
		return 1
	}
	defer func() {
		say("stopping containerd and removing its pods ...")
		if err := c.Stop(); err != nil {
			say("stop containerd: %v", err)
		} else {
			say("stopped; nothing left behind")
		}
	}()

	rootDir := filepath.Join(c.Dir, "speclet")
	cmd := exec.Command(*speclet, append([]string{"run",
		"--container-runtime-endpoint", c.Endpoint,
		"--pod-manifest-path", manifestDir,
		"--root-dir", rootDir,
		"--pod-logs-dir", filepath.Join(rootDir, "logs"), "--container-log-links-dir", filepath.Join(rootDir, "containers"),
		"--device-plugins-dir", filepath.Join(rootDir, "device-plugins"),
		"--read-only-port", fmt.Sprint(*port),
	}, fs.Args()...)...)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	// Its own process group: the terminal's Ctrl-C reaches speclet only
	// through us, in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		say("start %s: %v", *speclet, err)
		return 1
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", *port)
	say("")
	say("speclet (pid %d) runs the pods of %s on containerd %s", cmd.Process.Pid, manifestDir, c.Endpoint)
	say("  pods:     curl %s/pods", base)
	say("  health:   curl %s/healthz", base)
	say("  metrics:  curl %s/metrics", base)
	say("  logs:     speclet's below; containerd's in %s", c.LogPath())
	say("  change:   add, edit or remove files in %s (images: %s)", manifestDir, reg.Ref(harness.BusyboxRepo))
	say("  stop:     Ctrl-C (stops speclet, removes the pods, stops containerd)")
	say("")

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		say("speclet exited: %v", err)
		return 1
	case <-ctx.Done():
	}
	say("stopping speclet ...")
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			say("speclet: %v", err)
		}
	case <-time.After(30 * time.Second):
		say("speclet did not stop within 30s; killing it")
		cmd.Process.Kill()
		<-done
	}
	return 0
}

// prefixWriter prefixes every write (the harness logs whole lines).
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}
