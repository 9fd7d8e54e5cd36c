// Package flood holds thousands of connections to speclet's HTTP ports, as
// a careless client or an attacker would, and measures what a liveness
// probe and a new static pod see meanwhile (the contract of
// docs/operations.md, Limits: `/healthz` answers within 1 s and a new
// manifest starts within 2 s under 6,000 held connections to each port with
// speclet at a 4,096 file descriptor limit).
//
// Open is bounded in count (n connections) and time (every step of a
// connection has a timeout, the whole flood a deadline); Close ends it.
// The caller's own file descriptor limit must hold the connections
// (RaiseNoFile).
package flood

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/speclet/speclet/cri/harness"
)

// Held is a flood of connections to one address.
type Held struct {
	Addr string
	TLS  bool
	// Answered connections got an answer to their request (kept open),
	// Refused ones were closed or reset by the server before it, and
	// Waiting ones got nothing within the step timeout (queued by the
	// kernel; kept open).
	Answered, Refused, Waiting int
	Took                       time.Duration

	mu    sync.Mutex
	conns []net.Conn
}

// Open opens n connections to addr with workers in parallel. Each sends
// one keep-alive request, GET /pods (over TLS after a handshake: the
// kubelet API answers it 401 without credentials), reads the answer and
// stays open. Each step is bounded by step; the whole flood stops at
// deadline with fewer connections.
func Open(ctx context.Context, addr string, useTLS bool, n, workers int, step time.Duration, deadline time.Time) *Held {
	h := &Held{Addr: addr, TLS: useTLS}
	start := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				c, outcome := h.one(step)
				mu.Lock()
				switch outcome {
				case "answered":
					h.Answered++
				case "waiting":
					h.Waiting++
				default:
					h.Refused++
				}
				mu.Unlock()
				if c != nil {
					h.mu.Lock()
					h.conns = append(h.conns, c)
					h.mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil && time.Now().Before(deadline); i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	h.Took = time.Since(start)
	return h
}

// one opens one connection; it returns it unless the server closed it.
func (h *Held) one(step time.Duration) (net.Conn, string) {
	raw, err := net.DialTimeout("tcp", h.Addr, step)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return nil, "waiting"
		}
		return nil, "refused"
	}
	c := raw
	raw.SetDeadline(time.Now().Add(step))
	if h.TLS {
		tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true})
		if err := tc.Handshake(); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				raw.SetDeadline(time.Time{})
				return raw, "waiting"
			}
			raw.Close()
			return nil, "refused"
		}
		c = tc
	}
	if _, err := fmt.Fprintf(c, "GET /pods HTTP/1.1\r\nHost: %s\r\n\r\n", h.Addr); err != nil {
		c.Close()
		return nil, "refused"
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	raw.SetDeadline(time.Time{})
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return c, "waiting"
		}
		c.Close()
		return nil, "refused"
	}
	resp.Body.Close()
	return c, "answered"
}

// Len is the number of connections held open now (by this side).
func (h *Held) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Close closes every connection.
func (h *Held) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.Close()
	}
	h.conns = nil
}

func (h *Held) String() string {
	kind := "plain"
	if h.TLS {
		kind = "TLS"
	}
	return fmt.Sprintf("%s %s: %d answered, %d refused, %d waiting, %d held, in %s",
		kind, h.Addr, h.Answered, h.Refused, h.Waiting, h.Len(), h.Took.Round(time.Millisecond))
}

// RaiseNoFile raises this process's file descriptor limit to at least n.
func RaiseNoFile(n uint64) error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	if l.Cur >= n {
		return nil
	}
	l.Cur, l.Max = n, max(l.Max, n)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", n, err)
	}
	return nil
}

// Probe GETs url on a new connection within timeout and returns how long
// the answer took; an answer other than 200 is an error.
func Probe(url string, timeout time.Duration) (time.Duration, error) {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	start := time.Now()
	resp, err := client.Get(url)
	if err != nil {
		return time.Since(start), err
	}
	resp.Body.Close()
	d := time.Since(start)
	if resp.StatusCode != 200 {
		return d, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return d, nil
}

// Percentiles returns p50, p99 and the maximum of ds.
func Percentiles(ds []time.Duration) (p50, p99, top time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.50), at(0.99), s[len(s)-1]
}

// Proc is what /proc says of a process: open file descriptors, resident
// memory and its file descriptor limit.
type Proc struct {
	FDs      int
	RSS      int64 // bytes
	NoFile   int64 // soft limit
	NoFileOK bool
}

// ReadProc reads /proc/<pid>.
func ReadProc(pid int) Proc {
	var p Proc
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	if ents, err := os.ReadDir(filepath.Join(dir, "fd")); err == nil {
		p.FDs = len(ents)
	}
	if mem, err := harness.ProcStatus(pid, "VmRSS"); err == nil {
		p.RSS = mem["VmRSS"]
	}
	if b, err := os.ReadFile(filepath.Join(dir, "limits")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(strings.TrimPrefix(line, "Max open files")); strings.HasPrefix(line, "Max open files") && len(f) >= 1 {
				p.NoFile, _ = strconv.ParseInt(f[0], 10, 64)
				p.NoFileOK = true
			}
		}
	}
	return p
}
