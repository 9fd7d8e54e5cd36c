package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// listener is what http.Server accepts from: its own goroutine (run)
// accepts from the kernel without ever waiting for a free slot, sorts each
// connection into a served slot, a reserve slot or none (closed at once),
// runs the TLS handshake when there is one, and hands the connection over.
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
	case l.open.Load() < int64(l.lim.MaxConns):
		l.open.Add(1)
	case l.reserved.Load() < int64(l.lim.ReserveConns):
		l.reserved.Add(1)
		lc.reserve = true
		lc.timer = time.AfterFunc(l.lim.ReserveTimeout, func() { lc.Close() })
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
	timer   *time.Timer // closes a reserve connection at ReserveTimeout
	once    sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.reserve {
			c.timer.Stop()
			c.l.reserved.Add(-1)
		} else {
			c.l.open.Add(-1)
		}
	})
	return err
}
