package engine

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
)

// startSim serves a simulated runtime on the real clock and dials it.
func startSim(b *testing.B) (*sim.Server, *cri.Client) {
	b.Helper()
	srv, err := sim.Start(b.TempDir(), sim.Options{Images: []string{"busybox:latest"}, EventBuffer: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Stop)
	rt, err := cri.Dial(context.Background(), srv.Endpoint)
	if err != nil {
		b.Fatal(err)
	}
	return srv, rt
}

// simProcessEnv names the directory a child of the test binary serves the
// simulated runtime in (serveSimProcess, from TestMain).
const simProcessEnv = "SPECLET_BENCH_SIM_DIR"

// startSimProcess runs this test binary again as a process that serves
// the simulated runtime (the images and event buffer of startSim) and
// dials it. left counts the sandboxes and containers the runtime still
// holds, over CRI. The process ends with b.
func startSimProcess(b *testing.B) (rt *cri.Client, left func() (sandboxes, containers int)) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), simProcessEnv+"="+b.TempDir())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	endpoint, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("simulated runtime process: %v", err)
	}
	rt, err = cri.Dial(context.Background(), strings.TrimSpace(endpoint))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close() })
	return rt, func() (int, int) {
		ctx := context.Background()
		sbs, err1 := rt.ListPodSandbox(ctx, nil)
		cs, err2 := rt.ListContainers(ctx, nil)
		if err1 != nil || err2 != nil {
			return -1, -1 // not known: not empty
		}
		return len(sbs), len(cs)
	}
}

// serveSimProcess serves the simulated runtime in dir, writes its endpoint
// on a line of standard output, and stops once standard input ends (the
// parent closed it or died).
func serveSimProcess(dir string) {
	srv, err := sim.Start(dir, sim.Options{Images: []string{"busybox:latest"}, EventBuffer: 1 << 16})
	if err != nil {
		fmt.Fprintln(os.Stderr, "simulated runtime:", err)
		os.Exit(1)
	}
	fmt.Println(srv.Endpoint)
	io.Copy(io.Discard, os.Stdin)
	srv.Stop()
}
