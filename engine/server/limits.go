package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bound what clients of the server can hold: how long a connection
// may take to send a request or read the answer, how long it may stay idle
// between requests, and how many connections are open at once. A connection
// over MaxConns waits in the kernel's accept queue (it holds no file
// descriptor of speclet's) until another closes, so a flood of connections
// costs speclet at most MaxConns descriptors and never stops the manifest
// source or the engine.
type Limits struct {
	MaxConns          int           // default 128
	ReadHeaderTimeout time.Duration // default 5 s: a connection that sends nothing is closed then
	ReadTimeout       time.Duration // default 10 s
	WriteTimeout      time.Duration // default 30 s
	IdleTimeout       time.Duration // default 30 s between keep-alive requests
}

// DefaultLimits are the limits of `speclet run`.
var DefaultLimits = Limits{MaxConns: 128, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
	WriteTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxConns > 0 {
		d.MaxConns = l.MaxConns
	}
	if l.ReadHeaderTimeout > 0 {
		d.ReadHeaderTimeout = l.ReadHeaderTimeout
	}
	if l.ReadTimeout > 0 {
		d.ReadTimeout = l.ReadTimeout
	}
	if l.WriteTimeout > 0 {
		d.WriteTimeout = l.WriteTimeout
	}
	if l.IdleTimeout > 0 {
		d.IdleTimeout = l.IdleTimeout
	}
	return d
}

// Server is an HTTP server on one listener with Limits.
type Server struct {
	http *http.Server
	ln   *limitListener
}

// New returns a server of h on l with lim (zero fields take DefaultLimits).
// Serve it with Serve; stop it with Shutdown.
func New(l net.Listener, h http.Handler, lim Limits) *Server {
	lim = lim.withDefaults()
	return &Server{
		http: &http.Server{Handler: h, ReadHeaderTimeout: lim.ReadHeaderTimeout, ReadTimeout: lim.ReadTimeout,
			WriteTimeout: lim.WriteTimeout, IdleTimeout: lim.IdleTimeout},
		ln: &limitListener{Listener: l, sem: make(chan struct{}, lim.MaxConns), done: make(chan struct{})},
	}
}

// Serve serves until Shutdown; it returns nil after Shutdown.
func (s *Server) Serve() error {
	if err := s.http.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting and closes idle connections, waiting for active
// ones until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

// Open returns the number of connections open now.
func (s *Server) Open() int { return int(s.ln.open.Load()) }

// limitListener accepts a connection only while fewer than cap(sem) are open.
type limitListener struct {
	net.Listener
	sem  chan struct{}
	open atomic.Int64
	done chan struct{} // closed by Close
	once sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	l.open.Add(1)
	return &limitConn{Conn: c, l: l}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		<-c.l.sem
	})
	return err
}
