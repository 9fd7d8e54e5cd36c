// Command cluster runs a one-machine Kubernetes cluster of speclet nodes: it
// is what `make cluster` starts.
//
// It builds (once, cached in $HOME/.cache/speclet/kube/<version>/) and runs
// etcd, kube-apiserver, kube-scheduler and kube-controller-manager on
// 127.0.0.1 (test/cluster), starts an image registry on --registry-addr
// serving busybox:latest and pause:latest, and runs --nodes speclet nodes,
// each on its own containerd (cri/harness) and each joined with its own
// system:node:<name> credentials and --node-ip 127.0.0.1; with --hollow N
// also N hollow nodes hollow-0..N-1 in one `speclet hollow` process, each
// with its own static token for system:node:hollow-<i>. With
// --metrics-server (the default) it also runs metrics-server
// (cluster.MetricsServerVersion, built from its Go module once, cached in
// $HOME/.cache/speclet/metrics-server/<version>/) on the host end of a veth
// pair it makes, registered as the v1beta1.metrics.k8s.io APIService, so
// that `kubectl top nodes` and `kubectl top pods` work. It prints the
// export line for KUBECONFIG (an admin kubeconfig) and a kubectl example.
// Ctrl-C (or SIGTERM) stops the nodes, removes every pod and stops
// containerd, unmounts the pods' volumes, stops the registry and the control
// plane (metrics-server first, then the veth pair), then checks that nothing is left: no process, mount or directory of
// what it started. It says "stopped; nothing is left" only then; otherwise
// it lists what is left and exits 1.
//
// Usage (as root):
//
//	go run ./test/cluster/cmd/cluster --speclet bin/speclet [--nodes 2] [--hollow 0] [--metrics-server=true] [--registry-addr 127.0.0.1:5000] [-- speclet run flags]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/cluster"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) (code int) {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	speclet := fs.String("speclet", "", "the speclet binary (default: build ./cmd/speclet)")
	nodes := fs.Int("nodes", 2, "how many speclet nodes")
	hollow := fs.Int("hollow", 0, "how many hollow nodes hollow-0..N-1 besides them: one `speclet hollow` process, each node its own engine over a simulated runtime, joined with its own system:node token")
	registryAddr := fs.String("registry-addr", "127.0.0.1:5000", "loopback address of the image registry every node pulls from")
	version := fs.String("version", cluster.DefaultVersion, "k8s.io/kubernetes version of the control plane")
	metricsServer := fs.Bool("metrics-server", true, "run metrics-server "+cluster.MetricsServerVersion+" (kubectl top) on a veth address the command makes")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "cluster: "+format+"\n", a...) }
	if os.Geteuid() != 0 {
		say("needs root: it runs containerd, which runs containers (try `sudo make cluster`)")
		return 1
	}
	if *nodes < 0 || *hollow < 0 || *nodes+*hollow < 1 {
		say("--nodes %d, --hollow %d: want at least one node", *nodes, *hollow)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// owned are the directories whatever the command started lives in
	// (node root dirs, containerd states, the control plane's): after the
	// teardown no process, mount or directory of them may be left.
	var owned []string
	var cleanups []func()
	defer func() {
		say("stopping: nodes, containerd, registry, control plane")
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		if left := harness.LeftBehind(owned...); len(left) > 0 {
			say("stopped; left behind:")
			for _, l := range left {
				say("  %s", l)
			}
			code = 1
			return
		}
		say("stopped; nothing is left")
	}()
	fail := func(format string, a ...any) int { say(format, a...); return 1 }

	if err := harness.EnsurePackages(ctx, stderr); err != nil {
		return fail("%v", err)
	}
	dir, err := os.MkdirTemp("", "speclet-cluster-nodes-")
	if err != nil {
		return fail("%v", err)
	}
	owned = append(owned, dir)
	cleanups = append(cleanups, func() {
		if err := harness.Unmount(dir); err != nil {
			say("%v", err)
		}
		if err := os.RemoveAll(dir); err != nil {
			say("remove %s: %v", dir, err)
		}
	})
	if *speclet == "" {
		say("building speclet")
		if *speclet, err = cluster.BuildSpeclet(dir); err != nil {
			return fail("%v", err)
		}
	}
	if !cluster.BinariesCached(*version) {
		say("building the control plane %s from the Go module k8s.io/kubernetes (about 10 minutes cold; cached afterwards)", *version)
	}
	c, err := cluster.Start(ctx, cluster.Options{Version: *version, Scheduler: true, ControllerManager: true, HollowNodes: *hollow, Log: stderr})
	if err != nil {
		return fail("%v", err)
	}
	owned = append(owned, c.Dir)
	cleanups = append(cleanups, func() {
		if err := c.Stop(); err != nil {
			say("%v", err)
		}
	})
	reg, err := harness.StartRegistry(*registryAddr)
	if err != nil {
		return fail("start registry on %s (--registry-addr): %v", *registryAddr, err)
	}
	cleanups = append(cleanups, func() { reg.Close() })
	if err := reg.PushDefaults(ctx); err != nil {
		return fail("push images: %v", err)
	}
	// The nodes stop first, all of them, so that none restarts a pod while
	// the runtimes remove them; then each runtime removes its pods and each
	// node's volumes are unmounted (speclet leaves its pods, and so their
	// volumes, in place when it stops).
	var started []*cluster.Node
	var runtimes []*harness.Containerd
	cleanups = append(cleanups, func() {
		for _, n := range started {
			if err := n.Stop(); err != nil {
				say("%v", err)
			}
		}
		for i, h := range runtimes {
			if err := h.Stop(); err != nil {
				say("stop containerd of node %d: %v", i, err)
			}
		}
		for _, n := range started {
			if err := n.Remove(); err != nil {
				say("%v", err)
			}
		}
	})
	for i := 0; i < *nodes; i++ {
		name := fmt.Sprintf("node-%c", 'a'+i)
		h, err := harness.StartContainerd(ctx, harness.Options{Registry: reg, Log: stderr})
		if err != nil {
			return fail("start containerd for %s: %v", name, err)
		}
		runtimes = append(runtimes, h)
		owned = append(owned, h.Dir)
		ndir := filepath.Join(dir, name)
		n, err := c.StartNode(ctx, cluster.NodeOptions{Name: name, Bin: *speclet, Containerd: h, Dir: ndir, Args: fs.Args()})
		if n != nil {
			started = append(started, n)
		}
		if err != nil {
			return fail("%v", err)
		}
		say("node %s: containerd %s, speclet log %s, read-only server %s", name, h.Endpoint, n.LogPath, n.Base)
	}
	if *hollow > 0 {
		h, err := c.StartHollow(ctx, cluster.HollowOptions{Bin: *speclet, Nodes: *hollow, Dir: filepath.Join(dir, "hollow"), Args: fs.Args()})
		if err != nil {
			return fail("%v", err)
		}
		cleanups = append(cleanups, func() { h.Stop() })
		say("hollow nodes %s..%s: speclet hollow log %s", cluster.HollowName(0), cluster.HollowName(*hollow-1), h.LogPath)
	}
	top := ""
	if *metricsServer {
		if !cluster.MetricsServerCached() {
			say("building metrics-server %s from its Go module (minutes cold; cached afterwards)", cluster.MetricsServerVersion)
		}
		bin, err := cluster.MetricsServerBinary(ctx, stderr)
		if err != nil {
			return fail("%v", err)
		}
		// kube-apiserver refuses a loopback address for the APIService's
		// endpoint: metrics-server serves on a veth pair of its own.
		addr, err := cluster.NewHostAddr("ms")
		if err != nil {
			return fail("metrics-server: %v", err)
		}
		cleanups = append(cleanups, func() {
			if err := addr.Remove(); err != nil {
				say("%v", err)
			}
		})
		ms, err := c.StartMetricsServer(ctx, cluster.MetricsServerOptions{Bin: bin, Addr: addr.IP})
		if err != nil {
			return fail("%v", err)
		}
		cleanups = append(cleanups, func() {
			if err := ms.Stop(); err != nil {
				say("%v", err)
			}
		})
		say("metrics-server %s: %s, log %s", cluster.MetricsServerVersion, ms.URL, ms.LogPath)
		top = fmt.Sprintf("  %s top nodes; %s top pods -A   # numbers after two scrapes, about 30 s\n", kubectl(c), kubectl(c))
	}
	fmt.Printf(`
A cluster of %d speclet nodes and %d hollow nodes is running. In another shell:

  export KUBECONFIG=%s
  %s get nodes -o wide
  %s create deployment web --image=%s/busybox:latest --replicas=3 -- sleep 3600
  %s get pods -o wide
%s
Static pods: drop a manifest into a node's manifests directory (%s/node-a/manifests).
Ctrl-C stops everything.
`, *nodes, *hollow, c.AdminKubeconfig(), kubectl(c), kubectl(c), reg.Addr, kubectl(c), top, dir)
	<-ctx.Done()
	return 0
}

func kubectl(c *cluster.Cluster) string { return filepath.Join(c.BinDir, "kubectl") }
