// Package harness runs a real containerd for tests, benchmarks and `make run`:
// a project-local daemon with its own root, state, socket, CNI bridge and
// registry mirror, pulling busybox and pause images built from Debian's
// busybox-static and served by an in-process OCI registry on 127.0.0.1, so
// that PullImage is real and no public registry is needed.
//
// Several instances may run at once, in one process or in parallel test
// binaries: each lives under its own directory (default /tmp/speclet-XXXX)
// with its own socket, ttrpc socket, runc root, CNI bridge and subnet, and
// IPAM directory; the debug and metrics listeners are off and the streaming
// server listens on 127.0.0.1:0. The harness never uses or touches the
// system containerd in /run/containerd; only the shim sockets, which
// containerd 1.6 and 2.x always put in /run/containerd/s, are created there
// (one per pod, named by a hash of the instance's socket) and removed again
// by Stop.
//
// # Runtimes
//
// An instance runs one of two runtimes (Options.Runtime; "" means the one
// $SPECLET_RUNTIME names, Containerd16 when it is unset):
//   - Containerd16, "containerd-1.6": Debian bookworm's containerd 1.6.20
//     and runc 1.1.5, config version 2.
//   - Containerd2, "containerd-2": containerd ContainerdVersion (daemon and
//     runc shim) and runc RuncVersion built from their Go modules by
//     BuildRuntime into $HOME/.cache/speclet/containerd/<version>/ and
//     $HOME/.cache/speclet/runc/<version>/, config version 3 (the CRI
//     plugins io.containerd.cri.v1.images, io.containerd.cri.v1.runtime and
//     io.containerd.grpc.v1.cri), the shim and runc named by path, NRI off.
//
// Both use Debian's CNI plugins, the same bridge, subnet, registry mirror
// (config_path with a hosts.toml per registry) and overlayfs snapshotter.
//
// Contracts:
//   - StartContainerd returns once the CRI answers Version and the busybox
//     and pause images are pulled; on error nothing of the instance is left.
//   - Stop removes every pod through the CRI, stops containerd, kills any
//     shim, runc or pod process of the instance that is left, lazily unmounts
//     everything under Dir, deletes the bridge, closes the registry it started
//     and removes the Dir it created. Afterwards Leftovers(Dir) and
//     Mounts(Dir) are empty.
//   - Restart stops and starts the daemon only; pods keep running in their
//     shims, as after a containerd upgrade.
//   - ForTest skips without root outside CI and fails with CI=true: in CI a
//     containerd that cannot start is a failure, never a skip.
//   - A test binary killed before its cleanup leaves its instance behind;
//     the next StartContainerd with a default Dir reaps instances whose owner
//     process is gone (ReapStale).
//
// The images: busybox:latest holds /bin/busybox with a symlink per applet
// (sh, sleep, echo, cat, ls, true, false, kill, ...) and runs "sh" by
// default; pause:latest is the same layer with PauseCommand as entrypoint,
// sleeping until SIGTERM and exiting 0 on it. containerd's sandbox_image is
// the registry's pause:latest.
//
// The package imports nothing of speclet (in particular not package cri), so
// that tests of any package, package cri's own included, can use it.
//
// # Usage
//
// In a test or benchmark (runs as root; installs the Debian packages of
// Packages with apt-get when missing, and builds Containerd2's binaries
// when it is chosen and they are not cached):
//
//	func TestSomething(t *testing.T) {
//		h := harness.ForTest(t) // stopped, with a leftover check, in t.Cleanup
//		rt, err := cri.Dial(ctx, h.Endpoint)
//		...
//		image := h.ImageRef(harness.BusyboxRepo) // "127.0.0.1:PORT/busybox:latest"
//	}
//
// To serve more images, push them to the instance's registry:
//
//	img, _ := harness.BusyboxImage()
//	ref, err := h.Registry.Push(ctx, "other:v1", img) // "127.0.0.1:PORT/other:v1"
//	missing := h.ImageRef("nosuch:latest")              // PullImage fails: not found
//
// Outside tests (the daemon's `make run`):
//
//	if err := harness.EnsurePackages(ctx, os.Stderr); err != nil { ... }
//	h, err := harness.StartContainerd(ctx, harness.Options{Log: os.Stderr})
//	if err != nil { ... }
//	defer h.Stop()
//	// point the daemon at h.Endpoint
//
// containerd's own output is in h.LogPath(); a failed start quotes its tail.
package harness
