package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
)

// maxSocketPath is the longest unix socket path Linux accepts (sun_path
// holds 108 bytes with the terminating NUL).
const maxSocketPath = 107

// SocketName is the socket Start creates in its directory.
const SocketName = "sim.sock"

// Server is a Runtime served over gRPC on a unix socket.
type Server struct {
	Runtime  *Runtime
	Endpoint string // "unix:///dir/sim.sock"
	Socket   string // the socket's path; "" when served on a listener given

	srv      *grpc.Server
	stopOnce sync.Once
	done     chan error
}

// Serve serves r on a unix socket at socketPath (a stale socket file there
// is replaced) until Stop.
func (r *Runtime) Serve(socketPath string) (*Server, error) {
	if !filepath.IsAbs(socketPath) {
		return nil, fmt.Errorf("serve simulated runtime: socket path %q is not absolute", socketPath)
	}
	if len(socketPath) > maxSocketPath {
		return nil, fmt.Errorf("serve simulated runtime: socket path %s is %d bytes, more than the %d a unix socket allows; use a shorter directory", socketPath, len(socketPath), maxSocketPath)
	}
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("serve simulated runtime: remove stale socket: %w", err)
	}
	l, err := net.Listen("unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("serve simulated runtime: %w", err)
	}
	s := r.ServeListener(l, "unix://"+socketPath)
	s.Socket = socketPath
	return s, nil
}

// ServeListener serves r on l until Stop; endpoint is what the Server
// reports as its Endpoint. Tests serve over an in-memory listener
// (google.golang.org/grpc/test/bufconn) and dial it with cri.WithDialer.
func (r *Runtime) ServeListener(l net.Listener, endpoint string) *Server {
	// The client's message limit: a ListContainers of 10,000 pods is several
	// megabytes.
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(cri.MaxMsgSize), grpc.MaxSendMsgSize(cri.MaxMsgSize),
		grpc.ChainUnaryInterceptor(r.scripted, r.loseReplies), grpc.StreamInterceptor(r.scriptedStream))
	runtimeapi.RegisterRuntimeServiceServer(srv, r)
	runtimeapi.RegisterImageServiceServer(srv, r)
	s := &Server{Runtime: r, Endpoint: endpoint, srv: srv, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(l) }()
	return s
}

// Start creates a simulated runtime with options o and serves it on
// dir/sim.sock; it is what the daemon's --runtime=sim runs. The directory is
// created when missing.
func Start(dir string, o Options) (*Server, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("start simulated runtime: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("start simulated runtime: %w", err)
	}
	return New(o).Serve(filepath.Join(dir, SocketName))
}

// Stop stops serving at once: open calls and event streams fail with
// Unavailable, the socket is removed. The runtime's state is kept; Serve it
// again to bring the runtime back. Stop is idempotent.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.srv.Stop()
		<-s.done
		if s.Socket != "" {
			_ = os.Remove(s.Socket)
		}
	})
}

// scripted is the server's interceptor that runs every unary call's
// scripted behaviour (before) ahead of the call.
func (r *Runtime) scripted(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := r.before(ctx, cri.Method(info.FullMethod)); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// scriptedStream is scripted for streams (GetContainerEvents).
func (r *Runtime) scriptedStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := r.before(ss.Context(), cri.Method(info.FullMethod)); err != nil {
		return err
	}
	return handler(srv, ss)
}

// before runs the scripted behaviour of a call of any CRI method, served
// or not: counts it (Calls), waits for its delay and fails it when
// scripted to (SlowCall, FailCall).
func (r *Runtime) before(ctx context.Context, method string) error {
	r.mu.Lock()
	r.calls[method]++
	var delay time.Duration
	var fail error
	if c := r.rules[method]; c != nil {
		delay = c.delay
		if c.fail > 0 {
			c.fail--
			fail = status.Error(c.code, c.msg)
		}
	}
	r.mu.Unlock()
	if delay > 0 {
		t := r.clock.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C():
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	return fail
}
