package harness

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// requireRoot skips (or, with CI=true, fails) a test that needs root.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: real containerd needs root")
		}
		t.Skip("real containerd needs root; run the tests as root")
	}
}

func TestBusyboxImageHasAppletsAndShell(t *testing.T) {
	img, err := BusyboxImage()
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform = %s/%s, want linux/<arch>", cf.OS, cf.Architecture)
	}
	if got := strings.Join(cf.Config.Cmd, " "); got != "sh" {
		t.Errorf("Cmd = %q, want sh", got)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
	}
	if h := entries["bin/busybox"]; h == nil || h.Mode&0o111 == 0 || h.Size < 100_000 {
		t.Fatalf("bin/busybox = %+v, want an executable of the static busybox", h)
	}
	for _, a := range []string{"sh", "sleep", "echo", "cat", "ls", "true", "false", "kill"} {
		h := entries["bin/"+a]
		if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("bin/%s = %+v, want a symlink to busybox", a, h)
		}
	}
	if h := entries["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/ = %+v, want a directory with mode 1777", h)
	}
}

func TestPauseImageSleepsUntilSIGTERM(t *testing.T) {
	img, err := PauseImage()
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(cf.Config.Entrypoint, " ")
	if !strings.Contains(got, "trap 'exit 0' TERM") || !strings.Contains(got, "sleep") {
		t.Errorf("Entrypoint = %q, want a sleep loop that exits 0 on SIGTERM", got)
	}
}

func TestRegistryServesPushedImages(t *testing.T) {
	r, err := StartRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !strings.HasPrefix(r.Addr, "127.0.0.1:") {
		t.Fatalf("Addr = %q, want 127.0.0.1:PORT", r.Addr)
	}
	ctx := context.Background()
	if err := r.PushDefaults(ctx); err != nil {
		t.Fatal(err)
	}
	for _, repo := range []string{BusyboxRepo, PauseRepo} {
		ref, err := name.ParseReference(r.Ref(repo), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(ref, remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("pull %s back: %v", ref, err)
		}
		if _, err := img.Digest(); err != nil {
			t.Fatal(err)
		}
	}
	missing, _ := name.ParseReference(r.Ref("nothere:latest"), name.Insecure)
	if _, err := remote.Image(missing, remote.WithContext(ctx)); err == nil {
		t.Errorf("pulling %s succeeded, want an error", missing)
	}
}

func TestStartRegistryRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "10.0.0.1:5000", "nonsense"} {
		if r, err := StartRegistry(addr); err == nil {
			r.Close()
			t.Errorf("StartRegistry(%q) succeeded, want an error", addr)
		} else if !strings.Contains(err.Error(), addr) {
			t.Errorf("StartRegistry(%q) error %q does not name the address", addr, err)
		}
	}
}

func TestStartContainerdRejectsLongDir(t *testing.T) {
	dir := t.TempDir() + "/" + strings.Repeat("d", 100)
	_, err := StartContainerd(context.Background(), Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "socket path") {
		t.Fatalf("StartContainerd with a %d-byte dir: err = %v, want a socket path error", len(dir), err)
	}
}

// pod runs a sandbox with one busybox container running cmd and returns the
// sandbox and container ids.
func pod(t *testing.T, rs runtimeapi.RuntimeServiceClient, c *Containerd, name string, hostNet bool, cmd ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := runtimeapi.NamespaceMode_POD
	if hostNet {
		ns = runtimeapi.NamespaceMode_NODE
	}
	sc := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "harness", Uid: name + "-uid"},
		LogDirectory: c.Dir + "/pods/" + name,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: ns},
		}},
	}
	sb, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sc})
	if err != nil {
		t.Fatalf("run sandbox %s: %v\n%s", name, err, c.logTail())
	}
	cc, err := rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId:  sb.PodSandboxId,
		SandboxConfig: sc,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
			Image:    &runtimeapi.ImageSpec{Image: c.ImageRef(BusyboxRepo)},
			Command:  cmd,
			LogPath:  "main.log",
		},
	})
	if err != nil {
		t.Fatalf("create container in %s: %v", name, err)
	}
	if _, err := rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cc.ContainerId}); err != nil {
		t.Fatalf("start container in %s: %v", name, err)
	}
	return sb.PodSandboxId, cc.ContainerId
}

func criClient(t *testing.T, c *Containerd) (runtimeapi.RuntimeServiceClient, *grpc.ClientConn) {
	t.Helper()
	conn, err := c.conn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn), conn
}

func containerState(t *testing.T, rs runtimeapi.RuntimeServiceClient, id string) runtimeapi.ContainerState {
	t.Helper()
	st, err := rs.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatalf("container status %s: %v", id, err)
	}
	return st.Status.State
}

// alive reports whether pid runs; a zombie waiting for init to reap it has
// already exited and counts as dead.
func alive(pid int) bool {
	_, state := stat(pid)
	return state != "" && state != "Z"
}

// TestStopLeavesNothing runs a host-network pod and a bridged pod, stops the
// harness, and checks that no containerd, shim, runc or pod process, no mount
// under its directory and no bridge is left.
func TestStopLeavesNothing(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	if err := EnsurePackages(ctx, &testLog{t}); err != nil {
		t.Fatal(err)
	}
	c, err := StartContainerd(ctx, Options{Log: &testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()
	rs, _ := criClient(t, c)
	_, hostCtr := pod(t, rs, c, "host", true, "sleep", "4242")
	_, netCtr := pod(t, rs, c, "bridged", false, "sleep", "4242")
	for _, id := range []string{hostCtr, netCtr} {
		if s := containerState(t, rs, id); s != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Fatalf("container %s is %v, want RUNNING", id, s)
		}
	}
	if !LinkExists(c.Bridge) {
		t.Errorf("bridge %s missing while a bridged pod runs", c.Bridge)
	}
	// StartContainer returns once runc has told the container's init to
	// exec its command; until the exec is done the process has no command
	// line yet. The count is taken again until both show, for 5 s at most.
	var before []Process
	var shims, sleeps int
	for wait := 0; wait < 50; wait++ {
		before = Leftovers(c.Dir)
		shims, sleeps = 0, 0
		for _, p := range before {
			switch {
			case strings.Contains(p.Cmdline, "containerd-shim-runc-v2"):
				shims++
			case strings.HasPrefix(p.Cmdline, "sleep 4242"):
				sleeps++
			}
		}
		if sleeps == 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c.PID() == 0 || shims == 0 || sleeps != 2 {
		t.Fatalf("before Stop: containerd pid %d, %d shims, %d pod processes (want >0, >0, 2): %s", c.PID(), shims, sleeps, describe(before))
	}
	if len(Mounts(c.Dir)) == 0 {
		t.Fatalf("before Stop: no mount under %s, want the pods' rootfs mounts", c.Dir)
	}
	ids := taskIDs(c.l)
	if len(ids) != 4 {
		t.Fatalf("before Stop: %d task ids in %s, want 2 sandboxes + 2 containers", len(ids), c.l.taskDir())
	}
	sockets := 0
	for _, id := range ids {
		if _, err := os.Stat(shimSocket(c.l.socket(), id)); err == nil {
			sockets++
		}
	}
	if sockets != 2 {
		t.Fatalf("before Stop: %d shim sockets in /run/containerd/s, want one per sandbox", sockets)
	}
	dir := c.Dir
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for _, p := range before {
		if alive(p.PID) {
			t.Errorf("after Stop: process %d %q still alive", p.PID, p.Cmdline)
		}
	}
	if left := Leftovers(dir); len(left) > 0 {
		t.Errorf("after Stop: processes of %s left: %s", dir, describe(left))
	}
	if m := Mounts(dir); len(m) > 0 {
		t.Errorf("after Stop: mounts under %s left: %v", dir, m)
	}
	if LinkExists(c.Bridge) {
		t.Errorf("after Stop: bridge %s still exists", c.Bridge)
	}
	for _, id := range ids {
		if _, err := os.Stat(shimSocket(c.l.socket(), id)); !os.IsNotExist(err) {
			t.Errorf("after Stop: shim socket of %s still in /run/containerd/s (err %v)", id, err)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("after Stop: %s still exists (err %v)", dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestRestartKeepsPodsRunning restarts the daemon under a running pod.
func TestRestartKeepsPodsRunning(t *testing.T) {
	c := ForTest(t) // skips without root outside CI
	rs, _ := criClient(t, c)
	_, ctr := pod(t, rs, c, "survivor", true, "sleep", "4242")
	oldPID := c.PID()
	var shimPIDs []int
	for _, p := range Leftovers(c.Dir) {
		if strings.Contains(p.Cmdline, "containerd-shim-runc-v2") {
			shimPIDs = append(shimPIDs, p.PID)
		}
	}
	if err := c.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.PID() == 0 || c.PID() == oldPID {
		t.Errorf("after Restart: containerd pid %d, old %d; want a new running daemon", c.PID(), oldPID)
	}
	for _, pid := range shimPIDs {
		if !alive(pid) {
			t.Errorf("after Restart: shim %d died", pid)
		}
	}
	rs, _ = criClient(t, c)
	if s := containerState(t, rs, ctr); s != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("after Restart: container is %v, want RUNNING", s)
	}
}

// TestInstancesAreIndependent runs two instances at once: each serves its own
// pods, and stopping one leaves the other's pod running.
func TestInstancesAreIndependent(t *testing.T) {
	a, b := ForTest(t), ForTest(t)
	if a.Endpoint == b.Endpoint || a.Bridge == b.Bridge || a.Registry.Addr == b.Registry.Addr {
		t.Fatalf("instances share an endpoint, bridge or registry: %s %s, %s %s, %s %s",
			a.Endpoint, b.Endpoint, a.Bridge, b.Bridge, a.Registry.Addr, b.Registry.Addr)
	}
	ra, _ := criClient(t, a)
	rb, _ := criClient(t, b)
	_, ctrA := pod(t, ra, a, "same-name", true, "sleep", "4242")
	_, ctrB := pod(t, rb, b, "same-name", true, "sleep", "4242")
	list, err := ra.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Containers) != 1 || list.Containers[0].Id != ctrA {
		t.Errorf("instance a lists %d containers, want only its own %s", len(list.Containers), ctrA)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if s := containerState(t, rb, ctrB); s != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("after stopping a, b's container is %v, want RUNNING", s)
	}
}

func TestEnsurePackagesIsIdempotent(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	if err := EnsurePackages(ctx, io.Discard); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	if err := EnsurePackages(ctx, &log); err != nil {
		t.Fatalf("second EnsurePackages: %v", err)
	}
	if log.Len() != 0 {
		t.Errorf("second EnsurePackages logged %q, want nothing to do", log.String())
	}
	if m := missingPackages(ctx); len(m) > 0 {
		t.Errorf("packages still missing: %v", m)
	}
}

// TestReapStaleCleansAfterDeadOwner plays a test binary killed before its
// cleanup ran: its instance, pod included, is reaped by the next start.
func TestReapStaleCleansAfterDeadOwner(t *testing.T) {
	requireRoot(t)
	c, err := StartContainerd(context.Background(), Options{Log: &testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	rs, _ := criClient(t, c)
	pod(t, rs, c, "orphan", false, "sleep", "4242")
	before := Leftovers(c.Dir)
	ids := taskIDs(c.l)
	if len(before) < 3 || len(Mounts(c.Dir)) == 0 || !LinkExists(c.Bridge) || len(Cgroups(ids)) == 0 {
		t.Fatalf("before: %d processes, %d mounts, bridge %v, %d cgroups; want a running pod", len(before), len(Mounts(c.Dir)), LinkExists(c.Bridge), len(Cgroups(ids)))
	}
	// A process that has exited stands for the dead owner.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.l.ownerFile(), []byte(fmt.Sprint(dead.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	var logged []string
	ReapStale(func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) })
	for _, p := range before {
		if alive(p.PID) {
			t.Errorf("after ReapStale: process %d %q still alive", p.PID, p.Cmdline)
		}
	}
	if m := Mounts(c.Dir); len(m) > 0 {
		t.Errorf("after ReapStale: mounts left: %v", m)
	}
	if LinkExists(c.Bridge) {
		t.Errorf("after ReapStale: bridge %s left", c.Bridge)
	}
	if cg := Cgroups(ids); len(cg) > 0 {
		t.Errorf("after ReapStale: cgroups of its pod left: %v", cg)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("after ReapStale: %s still exists", c.Dir)
	}
	if !strings.Contains(strings.Join(logged, "\n"), "removed stale instance "+c.Dir) {
		t.Errorf("ReapStale logged %q, want a line naming %s", logged, c.Dir)
	}
}

// TestStartWithEmptyRegistryFailsCleanly gives containerd a registry without
// the pause image: the start fails naming the image, and nothing runs.
func TestStartWithEmptyRegistryFailsCleanly(t *testing.T) {
	requireRoot(t)
	r, err := StartRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dir := t.TempDir()
	c, err := StartContainerd(context.Background(), Options{Dir: dir, Registry: r})
	if err == nil {
		c.Stop()
		t.Fatal("StartContainerd with an empty registry succeeded, want a pull error")
	}
	t.Logf("start error: %v", err)
	if c != nil {
		t.Errorf("StartContainerd returned an instance with its error")
	}
	if want := r.Ref(PauseRepo); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the image %s", err, want)
	}
	if left := Leftovers(dir); len(left) > 0 {
		t.Errorf("processes left after the failed start: %s", describe(left))
	}
	if m := Mounts(dir); len(m) > 0 {
		t.Errorf("mounts left after the failed start: %v", m)
	}
}
