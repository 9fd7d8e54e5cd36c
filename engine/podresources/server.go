package podresources

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
)

const (
	// DirName is the socket's directory under the root dir (kubelet's
	// DefaultKubeletPodResourcesDirName).
	DirName = "pod-resources"
	// SocketName is the socket's file name in it.
	SocketName = "kubelet.sock"
	// QPS and Burst are kubelet's rate limit of the API (DefaultQPS,
	// DefaultBurstTokens): one token bucket for every caller.
	QPS   = 100
	Burst = 10
)

// ErrLimitExceeded is what a call over the rate limit gets, kubelet's
// ErrorLimitExceeded.
var ErrLimitExceeded = status.Error(codes.ResourceExhausted, "rejected by rate limit")

// SocketPath is where the API listens under rootDir:
// <rootDir>/pod-resources/kubelet.sock.
func SocketPath(rootDir string) string { return filepath.Join(rootDir, DirName, SocketName) }

// Config is what a Server serves.
type Config struct {
	Pods    Pods    // required
	Devices Devices // the device-plugin manager; nil: no devices
	// Registerer takes kubelet's pod-resources request counters; nil:
	// none.
	Registerer prometheus.Registerer
	Log        *slog.Logger // nil: slog.Default()

	now func() time.Time // the rate limit's clock; nil: time.Now (tests set it)
}

// Server is the API on its socket.
type Server struct {
	path string
	grpc *grpc.Server
	l    net.Listener
	log  *slog.Logger
	done chan struct{}
}

// maxPath is the longest path a unix socket's address holds
// (sockaddr_un's sun_path, less its terminating NUL).
const maxPath = 107

// Listen makes the socket at path and a Server on it; Serve serves it.
// As kubelet (cri-client's CreateListener), it makes the directory (0750)
// when missing, removes a stale socket left by an earlier run, and binds
// the socket under a temporary name it then renames to path, so a client
// never sees a socket that does not answer yet; the temporary name is
// kubelet's (os.CreateTemp's digits, at most 10 bytes: shorter than
// kubelet.sock), so every path that holds the socket also holds the
// temporary one. The socket's mode is what the process's umask gives
// (kubelet sets none). Errors name the path.
//
// An error is the node's: as kubelet exits when it cannot make this
// socket ("Failed to create listener for podResources endpoint",
// os.Exit(1)), the caller stops the start.
func Listen(path string, c Config) (*Server, error) {
	if c.Pods == nil {
		return nil, errors.New("pod-resources API: no Pods")
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if len(path) > maxPath {
		return nil, fmt.Errorf("pod-resources socket %s: the path is %d bytes, a unix socket's longest is %d (give a shorter --root-dir)", path, len(path), maxPath)
	}
	m, err := newCounters(c.Registerer)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("pod-resources socket: create directory: %w", err)
	}
	if err := syscall.Unlink(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("pod-resources socket: remove the stale %s: %w", path, err)
	}
	f, err := os.CreateTemp(dir, "")
	if err != nil {
		return nil, fmt.Errorf("pod-resources socket: temporary name in %s: %w", dir, err)
	}
	tmp := f.Name()
	f.Close()
	if err := os.Remove(tmp); err != nil {
		return nil, fmt.Errorf("pod-resources socket: %w", err)
	}
	l, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("pod-resources socket: listen on %s: %w", tmp, err)
	}
	// The listener would unlink its own (temporary) name on Close; Stop
	// removes path itself.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := os.Rename(tmp, path); err != nil {
		l.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("pod-resources socket: move into place at %s: %w", path, err)
	}
	limiter, now := rate.NewLimiter(QPS, Burst), c.now
	if now == nil {
		now = time.Now
	}
	g := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !limiter.AllowN(now(), 1) {
			return nil, ErrLimitExceeded
		}
		return h(ctx, req)
	}))
	v1alpha1.RegisterPodResourcesListerServer(g, &v1alpha1Lister{pods: c.Pods, devices: c.Devices, m: m})
	podresourcesv1.RegisterPodResourcesListerServer(g, &v1Lister{pods: c.Pods, devices: c.Devices, m: m})
	return &Server{path: path, grpc: g, l: l, log: c.Log, done: make(chan struct{})}, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Serve answers calls until Stop; it returns nil after Stop.
func (s *Server) Serve() error {
	defer close(s.done)
	err := s.grpc.Serve(s.l)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Stop ends the server within timeout (calls in flight finish first, for
// at most that long) and removes the socket. Serve must have been called.
func (s *Server) Stop(timeout time.Duration) {
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(timeout):
		s.grpc.Stop()
		<-stopped
	}
	<-s.done
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("pod-resources socket not removed", "path", s.path, "err", err)
	}
}
