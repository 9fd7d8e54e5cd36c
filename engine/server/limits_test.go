package server

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// held opens n connections to addr that each send one keep-alive request
// and then stay open (the server may close them); they are closed at the
// end of the test.
func held(t *testing.T, addr string, n int) {
	t.Helper()
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /pods HTTP/1.1\r\nHost: x\r\n\r\n")
	}
}

// drained waits until srv has accepted n connections: the flood is held
// (or shed), no longer arriving.
func drained(t *testing.T, srv *Server, n int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); srv.ln.accepted.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d connections accepted after a minute", srv.ln.accepted.Load(), n)
		}
	}
}

// TestServerAnswersBeyondHeldConnections: MaxConns keep-alive connections
// held open (with timeouts far beyond the test) and hundreds more waiting do
// not keep /healthz from answering: a reserve connection or an idle slot
// serves it, and the connections beyond the cap are closed (at accept, or
// when a newer one takes their idle slot) instead of queueing in front of
// it.
func TestServerAnswersBeyondHeldConnections(t *testing.T) {
	long := 10 * time.Minute
	srv, addr := serveLimited(t, Handler(&fakeNode{}, nil), nil, Limits{MaxConns: 8, ReserveConns: 2, ReserveTimeout: long,
		ReadHeaderTimeout: long, ReadTimeout: long, WriteTimeout: long, IdleTimeout: long})
	held(t, addr, 500)
	drained(t, srv, 500)
	// a bound, not an assertion: without the reserve it never answers
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range 5 {
		healthy(t, client, addr) // beyond 500 held connections
	}
	if n := srv.Open(); n > 10 {
		t.Errorf("%d connections open, limit 8+2", n)
	}
	// Beyond the cap a connection is closed: at accept when every slot is
	// in a request, or as the oldest idle one when a newer one takes its
	// slot; which, depends on how far the server got with the flood.
	if srv.Shed()+srv.Evicted() == 0 {
		t.Errorf("none of 500 connections over a limit of 8+2 was closed (shed or evicted)")
	}
}

// TestServerReserveClosesAfterOneAnswer: while every served connection is
// in a request, a new connection is served from the reserve: its answer
// says "Connection: close" and it is closed.
func TestServerReserveClosesAfterOneAnswer(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	mux := http.NewServeMux()
	mux.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) { <-release })
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	long := 10 * time.Minute
	srv, addr := serveLimited(t, mux, nil, Limits{MaxConns: 1, ReserveConns: 1, ReserveTimeout: long,
		ReadHeaderTimeout: long, IdleTimeout: long, WriteTimeout: long})
	busy, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	fmt.Fprintf(busy, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n")
	for srv.ln.idleLen() > 0 || srv.Open() < 1 { // the request is in
		time.Sleep(time.Millisecond)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(time.Minute)) // a bound, not an assertion
	b, err := io.ReadAll(c)                        // ends when the server closes
	if err != nil {
		t.Fatalf("read: %v (the reserve connection stayed open)", err)
	}
	if !strings.Contains(string(b), "200 OK") || !strings.Contains(string(b), "Connection: close") {
		t.Errorf("answer %q: want 200 with Connection: close", b)
	}
	if n := srv.Evicted(); n != 0 {
		t.Errorf("%d connections evicted; the one in a request must stay", n)
	}
}

// TestServerEvictsTheOldestIdle: when every served connection is taken, a
// new one takes the slot of the connection idle the longest.
func TestServerEvictsTheOldestIdle(t *testing.T) {
	long := 10 * time.Minute
	srv, addr := serveLimited(t, Handler(&fakeNode{}, nil), nil, Limits{MaxConns: 2, ReserveConns: 1, ReserveTimeout: long,
		ReadHeaderTimeout: long, IdleTimeout: long})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(time.Minute)) // a bound, not an assertion
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Connection") == "close" {
			t.Errorf("connection %d: %s, Connection %q; want 200 on a served (keep-alive) connection", i, resp.Status, resp.Header.Get("Connection"))
		}
		// net/http marks a connection idle after its answer is written, so
		// the client can read the answer first: wait for the server's own
		// count, or the order of "idle the longest" is the scheduler's.
		for i < 2 && srv.ln.idleLen() < i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	// the first one was closed to make room for the third
	if _, err := conns[0].Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("read on the oldest idle connection: %v, want it closed", err)
	}
	if n := srv.Evicted(); n != 1 {
		t.Errorf("%d evicted, want 1", n)
	}
}

// TestServerTLSHandshakeTimeout: a TLS connection that sends nothing is
// closed TLSHandshakeTimeout after its accept, although the header and
// idle timeouts are far longer; a client that does its handshake is served.
func TestServerTLSHandshakeTimeout(t *testing.T) {
	long := 10 * time.Minute
	_, addr := serveLimited(t, Handler(&fakeNode{}, nil), &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}},
		Limits{TLSHandshakeTimeout: 2 * time.Second, ReadHeaderTimeout: long, ReadTimeout: long, IdleTimeout: long})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Minute)) // a bound, not an assertion
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		t.Errorf("read on a silent TLS connection: %v, want it closed by the server", err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Errorf("GET /healthz over TLS: %d, TLS %v", resp.StatusCode, resp.TLS != nil)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestServerSizeLimits: a header over MaxHeaderBytes is 431, a body over
// MaxBodyBytes fails to read (413 from the handler).
func TestServerSizeLimits(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Write([]byte("ok"))
	})
	_, addr := serveLimited(t, h, nil, Limits{MaxHeaderBytes: 1 << 10, MaxBodyBytes: 1 << 10})
	base := "http://" + addr
	req, _ := http.NewRequest("GET", base+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 8<<10))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("8 KiB header: %v %v, want 431", resp, err)
	}
	for _, tc := range []struct {
		size int
		code int
	}{{512, 200}, {4 << 10, http.StatusRequestEntityTooLarge}} {
		resp, err := http.Post(base+"/", "text/plain", strings.NewReader(strings.Repeat("b", tc.size)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("POST of %d bytes: %d, want %d", tc.size, resp.StatusCode, tc.code)
		}
	}
}

// selfSigned returns a throwaway serving certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serveLimited serves h with lim on a loopback port (over TLS with cfg,
// nil: plain HTTP) until the test ends, and returns the server and its
// address.
func serveLimited(t *testing.T, h http.Handler, cfg *tls.Config, lim Limits) (*Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewTLS(l, h, cfg, lim)
	go srv.Serve()
	t.Cleanup(func() { srv.Close() })
	return srv, l.Addr().String()
}

// healthy fails t unless GET /healthz at addr through client answers 200
// "ok".
func healthy(t *testing.T, client *http.Client, addr string) {
	t.Helper()
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Errorf("GET /healthz = %d %q", resp.StatusCode, body)
	}
}
