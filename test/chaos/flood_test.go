package chaos

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/speclet/speclet/test/cluster"
	"github.com/speclet/speclet/test/flood"
)

var (
	floodDuration = flag.Duration("soak.flood.duration", 3*time.Minute, "how long TestSoakFlood churns pods under the connection flood")
	floodConns    = flag.Int("soak.flood.conns", 6000, "connections TestSoakFlood holds to each port in each round")
	floodHold     = flag.Duration("soak.flood.hold", 20*time.Second, "how long TestSoakFlood holds each round before it opens the next")
)

// TestSoakFlood is `make soak`'s connection flood: speclet --runtime=sim at
// a 4,096 file descriptor limit churns 50 static pods (added, edited,
// removed at random, seeded) for soak.flood.duration while both ports are
// flooded in rounds: soak.flood.conns connections to each port (the
// read-only port: idle keep-alive; the kubelet API: TLS handshake, 401,
// held), held for soak.flood.hold, closed, opened again. Meanwhile
// /healthz is probed every 500 ms on a new connection and a new pod is
// declared every 15 s; it prints the latency percentiles of both, apart
// for the phases where a round's connections arrive and where they are
// held, the daemon's file descriptors and RSS. It fails when, while
// connections are held, a probe takes over 1 s or fails, or a new pod is
// not Running in /pods within 2 s (the contract of docs/operations.md,
// Limits); misses while connections arrive are reported. It stops by
// itself: the rounds end with the duration.
func TestSoakFlood(t *testing.T) {
	if !*soakFlag {
		t.Skip("run with -soak (make soak)")
	}
	if err := flood.RaiseNoFile(uint64(2**floodConns + 4096)); err != nil {
		t.Skipf("cannot hold %d connections: %v", 2**floodConns, err)
	}
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	fmt.Fprintf(os.Stderr, "soak flood: seed %d, %d connections per port per round, %s\n", seed, *floodConns, *floodDuration)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	bin, err := cluster.BuildSpeclet(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d, err := flood.Start(bin, t.TempDir(), 4096, "--sync-frequency", "10s", "--crashloop-backoff-base", "1s")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), *floodDuration)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	// Figures are kept apart by phase: while a round's connections arrive
	// (opened by 128 workers per port as fast as they go) and while they
	// are held. The contract is the held phase's; the arrival phase shows
	// what a machine saturated by the flood's own client does to latency.
	var arriving atomic.Bool
	var health, starts [2][]time.Duration // [0] held, [1] arriving
	var failures, arrivalMisses []string
	phase := func() int {
		if arriving.Load() {
			return 1
		}
		return 0
	}
	fail := func(ph int, s string) {
		mu.Lock()
		defer mu.Unlock()
		if ph == 1 {
			arrivalMisses = append(arrivalMisses, s)
			return
		}
		failures = append(failures, s)
	}
	maxFDs, maxRSS, rounds, churns := 0, int64(0), 0, 0

	// churn: 50 pods, a change every 100-500 ms
	wg.Add(1)
	go func() {
		defer wg.Done()
		gen := map[int]int{}
		write := func(i int) {
			gen[i]++
			body := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: c%03d, annotations: {gen: \"%d\"}}\nspec:\n  restartPolicy: %s\n  terminationGracePeriodSeconds: 1\n  containers: [{name: main, image: 'busybox:latest', imagePullPolicy: IfNotPresent}]\n",
				i, gen[i], []string{"Always", "OnFailure", "Never"}[i%3])
			tmp := filepath.Join(d.Manifests, fmt.Sprintf(".c%03d", i))
			os.WriteFile(tmp, []byte(body), 0o644)
			os.Rename(tmp, filepath.Join(d.Manifests, fmt.Sprintf("c%03d.yaml", i)))
		}
		live := map[int]bool{}
		next := 0
		for ; next < 50; next++ {
			write(next)
			live[next] = true
		}
		for ctx.Err() == nil {
			keys := make([]int, 0, len(live))
			for k := range live {
				keys = append(keys, k)
			}
			k := keys[rng.IntN(len(keys))]
			switch op := rng.IntN(3); {
			case op == 0 && len(live) > 40:
				os.Remove(filepath.Join(d.Manifests, fmt.Sprintf("c%03d.yaml", k)))
				delete(live, k)
			case op == 1 && len(live) < 60:
				write(next)
				live[next] = true
				next++
			default:
				write(k)
			}
			mu.Lock()
			churns++
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(100+rng.IntN(400)) * time.Millisecond):
			}
		}
	}()

	// the flood, in rounds
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			arriving.Store(true)
			var held []*flood.Held
			var fw sync.WaitGroup
			var fmu sync.Mutex
			for _, p := range []struct {
				addr string
				tls  bool
			}{{strings.TrimPrefix(d.Base, "http://"), false}, {strings.TrimPrefix(d.API, "https://"), true}} {
				fw.Add(1)
				go func() {
					defer fw.Done()
					h := flood.Open(ctx, p.addr, p.tls, *floodConns, 128, 3*time.Second, time.Now().Add(90*time.Second))
					fmu.Lock()
					held = append(held, h)
					fmu.Unlock()
				}()
			}
			fw.Wait()
			arriving.Store(false)
			mu.Lock()
			rounds++
			r := rounds
			mu.Unlock()
			for _, h := range held {
				fmt.Fprintf(os.Stderr, "soak flood: round %d: %s\n", r, h)
			}
			select {
			case <-ctx.Done():
			case <-time.After(*floodHold):
			}
			for _, h := range held {
				h.Close()
			}
		}
	}()

	// a new pod every 15 s
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(15 * time.Second):
			}
			name := fmt.Sprintf("fresh%02d", i)
			ph := phase()
			took, err := d.StartLatency(name, 10*time.Second)
			ph = max(ph, phase())
			mu.Lock()
			starts[ph] = append(starts[ph], took)
			mu.Unlock()
			if err != nil {
				fail(ph, err.Error())
			} else if took > 2*time.Second {
				fail(ph, fmt.Sprintf("pod %s Running after %s, contract 2 s", name, took.Round(time.Millisecond)))
			}
			d.RemoveManifest(name)
		}
	}()

	// /healthz every 500 ms; the daemon's fds and RSS every 10 s
	last := time.Time{}
	for ctx.Err() == nil {
		ph := phase()
		took, err := flood.Probe(d.Base+"/healthz", 5*time.Second)
		ph = max(ph, phase())
		mu.Lock()
		health[ph] = append(health[ph], took)
		mu.Unlock()
		if err != nil {
			fail(ph, fmt.Sprintf("/healthz: %v after %s", err, took.Round(time.Millisecond)))
		} else if took > time.Second {
			fail(ph, fmt.Sprintf("/healthz answered after %s, contract 1 s", took.Round(time.Millisecond)))
		}
		if time.Since(last) >= 10*time.Second {
			last = time.Now()
			p := flood.ReadProc(d.Pid())
			maxFDs, maxRSS = max(maxFDs, p.FDs), max(maxRSS, p.RSS)
			mu.Lock()
			fmt.Fprintf(os.Stderr, "soak flood: fds %4d  RSS %6.1f MiB  probes %d  churned %d  rounds %d\n", p.FDs, float64(p.RSS)/(1<<20), len(health[0])+len(health[1]), churns, rounds)
			mu.Unlock()
		}
		time.Sleep(500 * time.Millisecond)
	}
	wg.Wait()
	for ph, name := range []string{"held", "arriving"} {
		hp50, hp99, hmax := flood.Percentiles(health[ph])
		sp50, sp99, smax := flood.Percentiles(starts[ph])
		fmt.Fprintf(os.Stderr, "soak flood summary, connections %s: /healthz %d probes p50 %s p99 %s max %s; new pod Running: %d pods p50 %s p99 %s max %s\n",
			name, len(health[ph]), hp50.Round(time.Microsecond), hp99.Round(time.Microsecond), hmax.Round(time.Microsecond),
			len(starts[ph]), sp50.Round(time.Millisecond), sp99.Round(time.Millisecond), smax.Round(time.Millisecond))
	}
	fmt.Fprintf(os.Stderr, "soak flood summary (seed %d): %d rounds of %d connections per port, %d churns; speclet at most %d fds, RSS %.1f MiB; %d misses of the contract while connections were held (failures), %d while they arrived (reported)\n",
		seed, rounds, *floodConns, churns, maxFDs, float64(maxRSS)/(1<<20), len(failures), len(arrivalMisses))
	for _, f := range arrivalMisses {
		t.Logf("while connections arrived: %s", f)
	}
	for _, f := range failures {
		t.Error(f)
	}
	if maxFDs > 1024 {
		t.Errorf("speclet held up to %d file descriptors under the flood", maxFDs)
	}
}
