package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"
)

// Limits bound what the clients of one server can hold. speclet's two
// servers, the read-only port and the kubelet API over TLS, run with the
// same DefaultLimits.
//
// Connections: at most MaxConns are served as usual. When all are taken, a
// new connection takes the slot of the one that has been out of a request
// the longest (in its TLS handshake, before its first request, or idle
// between keep-alive requests), which is closed: held connections cannot
// keep a new caller out. When every one is in a request, ReserveConns more
// are served one request each (the answer says "Connection: close") and
// closed ReserveTimeout after their accept at the latest. A connection
// beyond both is closed as soon as it is accepted: none waits in the
// kernel's accept queue, where a flood would put it behind thousands of
// others. So /healthz, /pods and a new caller stay answerable while others
// hold or open thousands of connections, and a server holds at most
// MaxConns+ReserveConns file descriptors.
//
// Time: a TLS connection must finish its handshake within
// TLSHandshakeTimeout of its accept; a request must send its header within
// ReadHeaderTimeout and its body within ReadTimeout, and its answer must be
// written within WriteTimeout; a keep-alive connection is closed after
// IdleTimeout without a request. A handler that streams (logs that follow,
// exec, attach, port-forward) lifts the read and write deadlines of its
// request itself (http.ResponseController); a hijacked connection has none.
//
// Size: a request header (the request line included) may have
// MaxHeaderBytes, a request body MaxBodyBytes; more is refused (431, 413).
type Limits struct {
	MaxConns            int           // default 256
	ReserveConns        int           // default 16
	ReserveTimeout      time.Duration // default 2 s
	MaxHeaderBytes      int           // default 64 KiB
	MaxBodyBytes        int64         // default 1 MiB
	TLSHandshakeTimeout time.Duration // default 5 s, from the accept
	ReadHeaderTimeout   time.Duration // default 5 s: a connection that sends nothing is closed then
	ReadTimeout         time.Duration // default 10 s
	WriteTimeout        time.Duration // default 30 s
	IdleTimeout         time.Duration // default 30 s between keep-alive requests
}

// DefaultLimits are the limits of both servers of `speclet run`.
var DefaultLimits = Limits{MaxConns: 256, ReserveConns: 16, ReserveTimeout: 2 * time.Second,
	MaxHeaderBytes: 64 << 10, MaxBodyBytes: 1 << 20, TLSHandshakeTimeout: 5 * time.Second,
	ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second}

// withDefaults is l with DefaultLimits' value in every field l leaves zero
// or negative.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	positive(&d.MaxConns, l.MaxConns)
	positive(&d.ReserveConns, l.ReserveConns)
	positive(&d.MaxHeaderBytes, l.MaxHeaderBytes)
	positive(&d.MaxBodyBytes, l.MaxBodyBytes)
	positive(&d.ReserveTimeout, l.ReserveTimeout)
	positive(&d.TLSHandshakeTimeout, l.TLSHandshakeTimeout)
	positive(&d.ReadHeaderTimeout, l.ReadHeaderTimeout)
	positive(&d.ReadTimeout, l.ReadTimeout)
	positive(&d.WriteTimeout, l.WriteTimeout)
	positive(&d.IdleTimeout, l.IdleTimeout)
	return d
}

// positive sets *dst to v when v is positive.
func positive[T int | int64 | time.Duration](dst *T, v T) {
	if v > 0 {
		*dst = v
	}
}

// Server is an HTTP server on one listener with Limits.
type Server struct {
	http *http.Server
	ln   *listener
}

// New returns a server of h on l with lim (zero fields take DefaultLimits).
// Serve it with Serve; stop it with Shutdown.
func New(l net.Listener, h http.Handler, lim Limits) *Server { return NewTLS(l, h, nil, lim) }

// NewTLS is New over TLS with cfg (nil: plain HTTP). The handshake runs
// before the server sees the connection, bounded by
// lim.TLSHandshakeTimeout from the accept.
func NewTLS(l net.Listener, h http.Handler, cfg *tls.Config, lim Limits) *Server {
	lim = lim.withDefaults()
	ln := newListener(l, cfg, lim)
	s := &Server{ln: ln}
	s.http = &http.Server{
		Handler: limitHandler(h, lim), ReadHeaderTimeout: lim.ReadHeaderTimeout, ReadTimeout: lim.ReadTimeout,
		WriteTimeout: lim.WriteTimeout, IdleTimeout: lim.IdleTimeout, MaxHeaderBytes: lim.MaxHeaderBytes,
		ConnState: ln.state,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			if lc, ok := c.(*conn); ok && lc.reserve {
				ctx = context.WithValue(ctx, reserveKey{}, true)
			}
			return ctx
		},
	}
	return s
}

type reserveKey struct{}

// limitHandler bounds the request body and closes a reserve connection
// after its one answer.
func limitHandler(h http.Handler, lim Limits) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(reserveKey{}) != nil {
			w.Header().Set("Connection", "close")
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, lim.MaxBodyBytes)
		}
		h.ServeHTTP(w, r)
	})
}

// Serve serves until Shutdown; it returns nil after Shutdown.
func (s *Server) Serve() error {
	go s.ln.run()
	if err := s.http.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops accepting and closes idle connections, waiting for active
// ones until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.Shutdown(ctx) }

// Close closes the listener and every connection at once.
func (s *Server) Close() error { return s.http.Close() }

// Open returns the number of connections open now (served and reserve,
// TLS handshakes in progress included).
func (s *Server) Open() int { return int(s.ln.open.Load() + s.ln.reserved.Load()) }

// Evicted returns the number of connections closed, outside a request, to
// make room for a new one.
func (s *Server) Evicted() int64 { return s.ln.evicted.Load() }

// Shed returns the number of connections closed at their accept because
// MaxConns and ReserveConns were all in use.
func (s *Server) Shed() int64 { return s.ln.shed.Load() }
