package server

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// listener is what http.Server accepts from: its own goroutine (run)
// accepts from the kernel without ever waiting for a free slot, sorts each
// connection into a served slot (closing the oldest connection that is not
// in a request when all are taken), a reserve slot or none (closed at
// once), runs the TLS handshake when there is one, and hands the
// connection over.
type listener struct {
	inner net.Listener
	tls   *tls.Config
	lim   Limits

	conns chan net.Conn // admitted connections, to Accept
	errc  chan error    // the accept loop's end (the inner listener closed)
	done  chan struct{} // closed by Close
	once  sync.Once

	open     atomic.Int64 // served slots in use
	reserved atomic.Int64 // reserve slots in use
	shed     atomic.Int64 // connections closed at accept
	accepted atomic.Int64 // connections accepted, shed ones included
	evicted  atomic.Int64 // connections closed to make room for a new one

	mu   sync.Mutex
	idle list.List // of *conn in served slots and in no request (handshake, before the first request, keep-alive), oldest first
}

func newListener(l net.Listener, cfg *tls.Config, lim Limits) *listener {
	return &listener{inner: l, tls: cfg, lim: lim, conns: make(chan net.Conn), errc: make(chan error, 1), done: make(chan struct{})}
}

// Accept returns the next admitted connection.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errc:
		l.errc <- err // for every later call
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.inner.Close()
}

func (l *listener) Addr() net.Addr { return l.inner.Addr() }

// run accepts until the inner listener is closed. An accept error other
// than that (out of file descriptors: EMFILE) is retried after a pause that
// doubles from 5 ms to 1 s.
func (l *listener) run() {
	var pause time.Duration
	for {
		c, err := l.inner.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				l.errc <- err
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(pause):
				continue
			case <-l.done:
				l.errc <- net.ErrClosed
				return
			}
		}
		pause = 0
		l.admit(c)
	}
}

// admit gives c a served slot, else a reserve slot, else closes it. Only
// run's goroutine takes slots, so a load then an add cannot overshoot.
func (l *listener) admit(c net.Conn) {
	accepted := time.Now()
	l.accepted.Add(1)
	lc := &conn{Conn: c, l: l}
	switch {
	case l.open.Load() < int64(l.lim.MaxConns) || l.evictOldest():
		l.open.Add(1)
		l.setIdle(lc, true)
	case l.reserved.Load() < int64(l.lim.ReserveConns):
		l.reserved.Add(1)
		lc.reserve = true
		l.mu.Lock() // Close reads the timer under it
		lc.timer = time.AfterFunc(l.lim.ReserveTimeout, func() { lc.Close() })
		l.mu.Unlock()
	default:
		l.shed.Add(1)
		c.Close()
		return
	}
	if l.tls == nil {
		l.hand(lc)
		return
	}
	go func() {
		// Handshake within TLSHandshakeTimeout of the accept; the deadline
		// is lifted after it (http.Server sets its own per request).
		lc.SetDeadline(accepted.Add(l.lim.TLSHandshakeTimeout))
		tc := tls.Server(lc, l.tls)
		ctx, cancel := context.WithDeadline(context.Background(), accepted.Add(l.lim.TLSHandshakeTimeout))
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			tc.Close()
			return
		}
		lc.SetDeadline(time.Time{})
		l.hand(tc)
	}()
}

// evictOldest closes the served connection that has been out of a request
// the longest; false when every served connection is in a request.
func (l *listener) evictOldest() bool {
	l.mu.Lock()
	e := l.idle.Front()
	l.mu.Unlock()
	if e == nil {
		return false
	}
	e.Value.(*conn).Close() // gives its slot back now
	l.evicted.Add(1)
	return true
}

// setIdle marks a served connection as out of a request (newest last), or
// as in one (not to be evicted).
func (l *listener) setIdle(c *conn, idle bool) {
	if c.reserve {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.elem != nil {
		l.idle.Remove(c.elem)
		c.elem = nil
	}
	if idle && !c.closed {
		c.elem = l.idle.PushBack(c)
	}
}

// state follows http.Server's ConnState: a connection in a request
// (active, hijacked) is not evicted; an idle one may be again.
func (l *listener) state(nc net.Conn, s http.ConnState) {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	switch s {
	case http.StateActive, http.StateHijacked:
		l.setIdle(c, false)
	case http.StateIdle:
		l.setIdle(c, true)
	}
}

// hand passes c to Accept, or closes it when the listener is closed.
func (l *listener) hand(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

// conn gives its slot back when closed.
type conn struct {
	net.Conn
	l       *listener
	reserve bool
	timer   *time.Timer // closes a reserve connection at ReserveTimeout; guarded by l.mu
	once    sync.Once
	elem    *list.Element // in l.idle; guarded by l.mu
	closed  bool          // guarded by l.mu
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.closed = true
		if c.elem != nil {
			c.l.idle.Remove(c.elem)
			c.elem = nil
		}
		timer := c.timer
		c.l.mu.Unlock()
		if c.reserve {
			timer.Stop()
			c.l.reserved.Add(-1)
		} else {
			c.l.open.Add(-1)
		}
	})
	return err
}

// idleLen is the number of served connections out of a request.
func (l *listener) idleLen() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.idle.Len()
}
