package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// tmpRoot and dirPrefix make the default Dir short enough for the socket.
	tmpRoot   = "/tmp"
	dirPrefix = "speclet-"

	// ContainerdBinary is the daemon Containerd16 runs (Debian's).
	ContainerdBinary = "/usr/bin/containerd"
)

// Options configure StartContainerd.
type Options struct {
	// Dir is the root of everything the instance writes (config, root, state,
	// socket, logs). "" means a new directory /tmp/speclet-XXXX, removed by
	// Stop. A given Dir is kept by Stop (its logs stay readable); the socket
	// path Dir/c.sock must stay under 100 bytes.
	Dir string
	// Registry serves the images. nil means start one and push
	// busybox:latest and pause:latest to it; Stop then closes it. A given
	// Registry must already hold pause:latest (see PushDefaults).
	Registry *Registry
	// Log receives the harness's own progress messages (nil: discarded).
	// containerd's output goes to Dir/containerd.log.
	Log io.Writer
	// NoPrePull skips pulling busybox:latest and pause:latest through the CRI
	// after start, leaving the image store empty.
	NoPrePull bool
	// Runtime is the runtime to run; "" means the one $SPECLET_RUNTIME names
	// (EnvRuntime: Containerd16 when unset). Containerd2's binaries are
	// built first when they are not cached (BuildRuntime).
	Runtime Runtime
}

// Containerd is one containerd daemon of the harness with its own root,
// state, socket, CNI bridge and registry mirror. Nothing of it lives in
// /run/containerd except the shim sockets containerd 1.6 and 2.x always put
// in /run/containerd/s (named by a hash of this instance's socket).
type Containerd struct {
	// Endpoint is the CRI endpoint, "unix:///tmp/speclet-XXXX/c.sock".
	Endpoint string
	// Dir is the instance's root directory.
	Dir string
	// Registry serves the instance's images over plain HTTP on 127.0.0.1.
	Registry *Registry
	// Bridge is the name of the CNI bridge pods without host network use; it
	// exists only once such a pod ran, and Stop deletes it.
	Bridge string
	// Subnet is the bridge's IPv4 subnet.
	Subnet string
	// Runtime is the runtime the instance runs.
	Runtime Runtime

	bins binaries

	l           layout
	log         io.Writer
	ownDir      bool
	ownRegistry bool

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	stopped bool
}

// StartContainerd writes a project-local config and starts containerd. It
// returns once the CRI answers Version and, unless o.NoPrePull, the busybox
// and pause images are pulled. On error nothing of the instance is left.
func StartContainerd(ctx context.Context, o Options) (res *Containerd, err error) {
	c := &Containerd{Dir: o.Dir, Registry: o.Registry, log: o.Log, Runtime: o.Runtime}
	if c.log == nil {
		c.log = io.Discard
	}
	if c.Runtime == "" {
		r, err := EnvRuntime()
		if err != nil {
			return nil, fmt.Errorf("start containerd: %w", err)
		}
		c.Runtime = r
	} else if _, err := ParseRuntime(string(c.Runtime)); err != nil {
		return nil, fmt.Errorf("start containerd: %w", err)
	}
	bins, err := binariesOf(ctx, c.Runtime, c.log)
	if err != nil {
		return nil, fmt.Errorf("start containerd: %w", err)
	}
	c.bins = bins
	if c.Dir == "" {
		ReapStale(c.logf)
		d, err := os.MkdirTemp(tmpRoot, dirPrefix)
		if err == nil {
			// Traversable, as containerd's /run/containerd is: the runc of
			// a pod in a user namespace reaches its bundle under state/ as
			// the pod's root, an unprivileged ID on the node.
			err = os.Chmod(d, 0o711)
		}
		if err != nil {
			return nil, fmt.Errorf("start containerd: %w", err)
		}
		c.Dir, c.ownDir = d, true
	} else {
		abs, err := filepath.Abs(c.Dir)
		if err != nil {
			return nil, fmt.Errorf("start containerd: dir %q: %w", c.Dir, err)
		}
		c.Dir = abs
		if err := os.MkdirAll(c.Dir, 0o711); err != nil {
			return nil, fmt.Errorf("start containerd: %w", err)
		}
	}
	c.l = layout{c.Dir}
	c.Endpoint = "unix://" + c.l.socket()
	if n := len(c.l.socket()); n > maxSocketPath {
		return nil, fmt.Errorf("start containerd: socket path %s is %d bytes, more than %d; use a shorter Dir", c.l.socket(), n, maxSocketPath)
	}
	defer func() {
		if err != nil {
			if stopErr := c.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
			res = nil
		}
	}()
	if err := os.WriteFile(c.l.ownerFile(), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return c, fmt.Errorf("start containerd: %w", err)
	}
	if c.Registry == nil {
		r, err := StartRegistry("")
		if err != nil {
			return c, fmt.Errorf("start containerd: %w", err)
		}
		c.Registry, c.ownRegistry = r, true
		if err := r.PushDefaults(ctx); err != nil {
			return c, fmt.Errorf("start containerd: %w", err)
		}
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return c, fmt.Errorf("start containerd: %w", err)
	}
	c.Bridge = "spl" + hex.EncodeToString(rnd[:])
	c.Subnet = fmt.Sprintf("10.%d.%d.0/24", 100+int(rnd[0])%150, rnd[1])
	if err := writeConfig(c.l, c.Runtime, c.bins, c.Registry.Addr, c.Bridge, c.Subnet); err != nil {
		return c, fmt.Errorf("start containerd: %w", err)
	}
	if err := c.start(ctx); err != nil {
		return c, err
	}
	if !o.NoPrePull {
		for _, img := range []string{c.ImageRef(PauseRepo), c.ImageRef(BusyboxRepo)} {
			if err := c.pull(ctx, img); err != nil {
				return c, err
			}
		}
	}
	c.logf("harness: %s ready at %s (dir %s, registry %s)", c.Runtime, c.Endpoint, c.Dir, c.Registry.Addr)
	return c, nil
}

// ImageRef returns the reference of name on the instance's registry, e.g.
// ImageRef("busybox:latest") = "127.0.0.1:PORT/busybox:latest".
func (c *Containerd) ImageRef(name string) string { return c.Registry.Ref(name) }

// LogPath is containerd's log file.
func (c *Containerd) LogPath() string { return c.l.log() }

// PID returns the process id of the running daemon, or 0.
func (c *Containerd) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	select {
	case <-c.exited:
		return 0
	default:
		return c.cmd.Process.Pid
	}
}

func (c *Containerd) logf(format string, args ...any) {
	if tl, ok := c.log.(*testLog); ok {
		tl.t.Helper()
		tl.t.Logf(format, args...)
		return
	}
	fmt.Fprintf(c.log, format+"\n", args...)
}

// start runs the daemon and waits until the CRI answers Version.
func (c *Containerd) start(ctx context.Context) error {
	logf, err := os.OpenFile(c.l.log(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	cmd := exec.Command(c.bins.containerd, "--config", c.l.config())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "TMPDIR="+c.l.temp())
	// Its own process group keeps terminal signals away; Pdeathsig takes the
	// daemon down with a test binary that dies before its cleanup runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start containerd: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	c.mu.Lock()
	c.cmd, c.exited = cmd, exited
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var lastErr error
	for {
		select {
		case <-exited:
			return fmt.Errorf("start containerd (%s): exited: %v\n%s", c.Endpoint, cmd.ProcessState, c.logTail())
		default:
		}
		if lastErr = c.version(ctx); lastErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("start containerd: no CRI Version answer at %s: %w (last: %v)\n%s", c.Endpoint, ctx.Err(), lastErr, c.logTail())
		case <-exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Containerd) logTail() string {
	b, _ := os.ReadFile(c.l.log())
	return "containerd log " + c.l.log() + ":\n" + tail(string(b), 3000)
}

// conn dials the CRI socket; the caller closes it.
func (c *Containerd) conn() (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(c.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", c.Endpoint, err)
	}
	return conn, nil
}

func (c *Containerd) version(ctx context.Context) error {
	conn, err := c.conn()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	return err
}

func (c *Containerd) pull(ctx context.Context, ref string) error {
	conn, err := c.conn()
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := runtimeapi.NewImageServiceClient(conn).PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		return fmt.Errorf("pull image %q at %s: %w\n%s", ref, c.Endpoint, err, c.logTail())
	}
	return nil
}

// removeAllPods stops and removes every sandbox (and so every container)
// through the CRI, with unlimited parallelism.
func (c *Containerd) removeAllPods() error {
	conn, err := c.conn()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list sandboxes at %s: %w", c.Endpoint, err)
	}
	errs := make([]error, len(list.Items))
	var wg sync.WaitGroup
	for i, sb := range list.Items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
				errs[i] = fmt.Errorf("stop sandbox %s: %w", sb.Id, err)
				return
			}
			if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
				errs[i] = fmt.Errorf("remove sandbox %s: %w", sb.Id, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stopDaemon sends SIGTERM to containerd and waits for it to exit, killing it
// after 10 s. Shims are left alone.
func (c *Containerd) stopDaemon() error {
	c.mu.Lock()
	cmd, exited := c.cmd, c.exited
	c.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return nil
	case <-time.After(10 * time.Second):
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("stop containerd %s: no exit 10 s after SIGTERM; killed", c.Endpoint)
}

// Restart stops the daemon only (the pods' shims and processes survive) and
// starts it again on the same config, state and socket; it returns once the
// CRI answers Version.
func (c *Containerd) Restart(ctx context.Context) error {
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		return fmt.Errorf("restart containerd %s: already stopped", c.Endpoint)
	}
	if err := c.stopDaemon(); err != nil {
		return fmt.Errorf("restart containerd: %w", err)
	}
	return c.start(ctx)
}

// Stop removes every pod through the CRI, stops containerd, kills any shim,
// runc or pod process of the instance that is left, lazily unmounts
// everything under Dir, deletes the CNI bridge, closes the registry it
// started and removes the Dir it created. Afterwards Leftovers(Dir) and
// Mounts(Dir) are empty; Stop returns an error only when something of the
// instance is left. Stop is idempotent.
func (c *Containerd) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	c.mu.Unlock()

	var errs []error
	t0 := time.Now()
	ids := taskIDs(c.l) // before the shims remove their state
	if c.PID() != 0 {
		// The CRI removal is the clean path; what it misses, reap kills and
		// unmounts below, and only what is left after that is an error.
		var err error
		for try := 0; try < 3; try++ {
			if err = c.removeAllPods(); err == nil {
				break
			}
		}
		if err != nil {
			c.logf("harness: remove pods through the CRI: %v (reaping instead)", err)
		} else {
			c.logf("harness: pods removed in %v", time.Since(t0).Round(time.Millisecond))
		}
		if err := c.stopDaemon(); err != nil {
			c.logf("harness: %v", err)
		}
		c.logf("harness: daemon stopped after %v", time.Since(t0).Round(time.Millisecond))
	}
	if c.Dir != "" {
		if err := reap(c.l, ids...); err != nil {
			errs = append(errs, fmt.Errorf("stop containerd %s: %w", c.Endpoint, err))
		}
		c.logf("harness: leftovers reaped after %v", time.Since(t0).Round(time.Millisecond))
	}
	if c.ownRegistry && c.Registry != nil {
		if err := c.Registry.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ownDir && len(Mounts(c.Dir)) == 0 {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("stop containerd: remove %s: %w", c.Dir, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	c.logf("harness: containerd %s stopped", c.Endpoint)
	return nil
}

// ForTest starts a containerd for a test or benchmark (installing the Debian
// packages first when missing) and stops it in t.Cleanup, failing the test
// (CheckLeaks) if a process it started since, or anything of the instance's
// Dir, is left. Without root it skips saying why, except with
// CI=true, where it fails: in CI a containerd that cannot start is a failure,
// never a skip.
func ForTest(t testing.TB) *Containerd {
	t.Helper()
	ci := os.Getenv("CI") == "true"
	if os.Geteuid() != 0 {
		msg := "real containerd needs root (to install packages, mount and run runc); run the tests as root"
		if ci {
			t.Fatalf("CI=true: %s", msg)
		}
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	log := &testLog{t: t}
	if err := EnsurePackages(ctx, log); err != nil {
		t.Fatalf("harness: %v", err)
	}
	rt, err := EnvRuntime()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	if rt == Containerd2 && !RuntimeBuilt() {
		// A cold build takes minutes on two cores; `make runtimes` does it
		// before the tests.
		bctx, bcancel := context.WithTimeout(context.Background(), 40*time.Minute)
		_, err := BuildRuntime(bctx, log)
		bcancel()
		if err != nil {
			t.Fatalf("harness: %v", err)
		}
	}
	leaks := CheckLeaks(t)
	c, err := StartContainerd(ctx, Options{Log: log, Runtime: rt})
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	leaks.Gone(c.Dir)
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("harness: %v", err)
		}
	})
	return c
}

// testLog writes harness messages to the test log.
type testLog struct{ t testing.TB }

func (l *testLog) Write(p []byte) (int, error) {
	l.t.Helper()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
