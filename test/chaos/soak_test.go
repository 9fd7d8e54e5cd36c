package chaos

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	soakFlag     = flag.Bool("soak", false, "run TestSoak (make soak): 100 pods churning for 10 minutes on the simulated runtime")
	soakDuration = flag.Duration("soak.duration", 10*time.Minute, "how long TestSoak churns")
	soakPods     = flag.Int("soak.pods", 100, "pods TestSoak keeps declared")
)

// TestSoak runs `speclet run --runtime=sim` with soak.pods pods whose
// manifests are added, edited and removed at random (seeded) for
// soak.duration, prints the daemon's heap in use and goroutines every 30 s,
// and fails when either grew by more than half (plus a small slack) from
// the second minute to the end. Not part of `make test`: `make soak`.
func TestSoak(t *testing.T) {
	if !*soakFlag {
		t.Skip("run with -soak (make soak)")
	}
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	fmt.Fprintf(os.Stderr, "soak: seed %d, %d pods, %s\n", seed, *soakPods, *soakDuration)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "speclet")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if out, err := exec.Command(goBin, "build", "-o", bin, "github.com/speclet/speclet/cmd/speclet").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	manifests := filepath.Join(tmp, "manifests")
	os.MkdirAll(manifests, 0o755)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	logf, _ := os.Create(filepath.Join(tmp, "speclet.log"))
	defer logf.Close()
	cmd := exec.Command(bin, "run", "--runtime=sim", "--root-dir", filepath.Join(tmp, "root"), "--pod-manifest-path", manifests,
		"--node-name", "soak", "--read-only-port", fmt.Sprint(port), "--port", "0", "--healthz-port", "0", "--sync-frequency", "10s", "--crashloop-backoff-base", "1s",
		"--max-pods", fmt.Sprint(*soakPods*2))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("speclet not healthy within a minute")
		}
	}
	gen := map[int]int{}
	write := func(i int) {
		gen[i]++
		restart := []string{"Always", "OnFailure", "Never"}[i%3]
		body := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: s%03d, annotations: {gen: \"%d\"}}\nspec:\n  restartPolicy: %s\n  terminationGracePeriodSeconds: 1\n  containers: [{name: main, image: 'busybox:latest', imagePullPolicy: IfNotPresent}]\n", i, gen[i], restart)
		tmpf := filepath.Join(manifests, fmt.Sprintf(".s%03d", i))
		os.WriteFile(tmpf, []byte(body), 0o644)
		os.Rename(tmpf, filepath.Join(manifests, fmt.Sprintf("s%03d.yaml", i)))
	}
	next := 0
	live := map[int]bool{}
	for ; next < *soakPods; next++ {
		write(next)
		live[next] = true
	}
	type point struct {
		at         time.Duration
		heap       float64
		goroutines float64
		pods       int
	}
	var points []point
	start := time.Now()
	churns := 0
	lastSample := time.Time{}
	for time.Since(start) < *soakDuration {
		keys := make([]int, 0, len(live))
		for k := range live {
			keys = append(keys, k)
		}
		k := keys[rng.IntN(len(keys))]
		switch op := rng.IntN(3); {
		case op == 0 && len(live) > *soakPods*4/5:
			os.Remove(filepath.Join(manifests, fmt.Sprintf("s%03d.yaml", k)))
			delete(live, k)
		case op == 1 && len(live) < *soakPods*6/5:
			write(next)
			live[next] = true
			next++
		default:
			write(k)
		}
		churns++
		if time.Since(lastSample) >= 30*time.Second {
			lastSample = time.Now()
			heap, g := metric(base, "go_memstats_heap_inuse_bytes"), metric(base, "go_goroutines")
			p := point{at: time.Since(start), heap: heap, goroutines: g, pods: len(live)}
			points = append(points, p)
			fmt.Fprintf(os.Stderr, "soak: %6s  pods %3d  heap in use %6.1f MiB  goroutines %4.0f  churned %d\n", p.at.Round(time.Second), p.pods, heap/(1<<20), g, churns)
		}
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
	}
	var tail []point
	for _, p := range points {
		if p.at >= time.Minute {
			tail = append(tail, p)
		}
	}
	if len(tail) < 2 {
		t.Logf("%d samples from the second minute on; nothing to compare", len(tail))
		return
	}
	minH, maxH, minG, maxG := tail[0].heap, tail[0].heap, tail[0].goroutines, tail[0].goroutines
	for _, p := range tail {
		minH, maxH = min(minH, p.heap), max(maxH, p.heap)
		minG, maxG = min(minG, p.goroutines), max(maxG, p.goroutines)
	}
	fmt.Fprintf(os.Stderr, "soak summary (seed %d): %d churns; from the second minute: heap in use %.1f..%.1f MiB, goroutines %.0f..%.0f\n",
		seed, churns, minH/(1<<20), maxH/(1<<20), minG, maxG)
	if maxH > minH*1.5+8<<20 {
		t.Errorf("heap in use grew from %.1f to %.1f MiB", minH/(1<<20), maxH/(1<<20))
	}
	if maxG > minG*1.5+50 {
		t.Errorf("goroutines grew from %.0f to %.0f", minG, maxG)
	}
}

// metric reads one unlabelled series from GET /metrics (NaN-free: 0 when absent).
func metric(base, name string) float64 {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}
