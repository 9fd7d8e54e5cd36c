package flood

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/speclet/speclet/test/cluster"
)

var (
	specletBin = flag.String("flood.speclet", "", "speclet binary to test (default: built from this tree)")
	floodConns = flag.Int("flood.conns", 6000, "connections held to each port")
)

// TestFloodHealthAndManifest is the contract of docs/operations.md (Limits):
// speclet --runtime=sim at a 4,096 file descriptor limit, 6,000 connections
// held to each port (the read-only port: idle keep-alive connections after
// one answered request; the kubelet API: a TLS handshake, one request
// answered 401, then held open). Meanwhile /healthz answers every probe
// within 1 s, and a new static manifest is Running in /pods within 2 s.
// The figures are logged (docs/performance.md).
func TestFloodHealthAndManifest(t *testing.T) {
	if err := RaiseNoFile(uint64(2**floodConns + 4096)); err != nil {
		t.Skipf("cannot hold %d connections: %v", 2**floodConns, err)
	}
	bin := *specletBin
	if bin == "" {
		var err error
		if bin, err = cluster.BuildSpeclet(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Start(bin, t.TempDir(), 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(d.LogPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("speclet log (tail):\n%s", b)
		}
	}()
	if p := ReadProc(d.Pid()); !p.NoFileOK || p.NoFile != 4096 {
		t.Fatalf("speclet's file descriptor limit %d (read %v), want 4096", p.NoFile, p.NoFileOK)
	}
	idle := ReadProc(d.Pid())

	// the flood: both ports at once, bounded in count and time
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	deadline := time.Now().Add(90 * time.Second)
	floods := make(chan *Held, 2)
	for _, port := range []struct {
		addr string
		tls  bool
	}{{d.Base[len("http://"):], false}, {d.API[len("https://"):], true}} {
		go func() { floods <- Open(ctx, port.addr, port.tls, *floodConns, 128, 3*time.Second, deadline) }()
	}
	for range 2 {
		h := <-floods
		defer h.Close()
		t.Logf("flood %s", h)
	}
	held := ReadProc(d.Pid())

	// under the held flood: probe /healthz every 200 ms for 6 s; start a
	// new manifest after 1 s
	var health []time.Duration
	var failures []string
	started := make(chan error, 1)
	var startTook time.Duration
	go func() {
		time.Sleep(time.Second)
		var err error
		startTook, err = d.StartLatency("fresh", 2*time.Second)
		started <- err
	}()
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		took, err := Probe(d.Base+"/healthz", 5*time.Second)
		health = append(health, took)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s after %s", err, took.Round(time.Millisecond)))
		}
	}
	startErr := <-started
	after := ReadProc(d.Pid())
	p50, p99, top := Percentiles(health)
	t.Logf("speclet before the flood: %d fds, RSS %.1f MiB; flood held: %d fds, RSS %.1f MiB; after the probes: %d fds, RSS %.1f MiB",
		idle.FDs, float64(idle.RSS)/(1<<20), held.FDs, float64(held.RSS)/(1<<20), after.FDs, float64(after.RSS)/(1<<20))
	t.Logf("/healthz under the flood: %d probes, p50 %s, p99 %s, max %s, %d failed; new manifest Running in %s",
		len(health), p50.Round(time.Microsecond), p99.Round(time.Microsecond), top.Round(time.Microsecond), len(failures), startTook.Round(time.Millisecond))
	for _, f := range failures {
		t.Errorf("/healthz probe failed: %s", f)
	}
	if top > time.Second {
		t.Errorf("/healthz took %s at most, contract 1 s", top)
	}
	if startErr != nil {
		t.Errorf("new manifest: %v", startErr)
	}
}
