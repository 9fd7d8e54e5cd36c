package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Registry is an in-process OCI registry (go-containerregistry's
// pkg/registry) serving plain HTTP on a loopback address. Images live in
// memory and disappear on Close.
type Registry struct {
	// Addr is the registry's host:port, always on 127.0.0.1.
	Addr string

	srv       *http.Server
	done      chan error
	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex
	private map[string][2]string // repository prefix -> user, password
}

// StartRegistry serves a new, empty registry on addr ("" means 127.0.0.1:0).
// Only loopback addresses are accepted.
func StartRegistry(addr string) (*Registry, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("start registry on %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("start registry on %q: address must be a loopback IP such as 127.0.0.1", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("start registry on %q: %w", addr, err)
	}
	r := &Registry{
		Addr: ln.Addr().String(),
		done: make(chan error, 1),
	}
	r.srv = &http.Server{
		Handler:           r.authorize(registry.New(registry.Logger(log.New(io.Discard, "", 0)))),
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() { r.done <- r.srv.Serve(ln) }()
	return r, nil
}

// RequireAuth makes pulls of repositories under prefix (e.g. "private/")
// need HTTP basic authentication with user and password; a request without
// them is answered 401 with a Basic challenge, as a private registry does.
// Push sends the credentials itself.
func (r *Registry) RequireAuth(prefix, user, password string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.private == nil {
		r.private = map[string][2]string{}
	}
	r.private[prefix] = [2]string{user, password}
}

// authorize checks the credentials of reads of private repositories.
func (r *Registry) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet || req.Method == http.MethodHead {
			repo := strings.TrimPrefix(req.URL.Path, "/v2/")
			r.mu.Lock()
			var want *[2]string
			for prefix, cred := range r.private {
				if strings.HasPrefix(repo, prefix) {
					want = &cred
				}
			}
			r.mu.Unlock()
			if want != nil {
				if u, p, ok := req.BasicAuth(); !ok || u != want[0] || p != want[1] {
					w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
					http.Error(w, "authentication required", http.StatusUnauthorized)
					return
				}
			}
		}
		next.ServeHTTP(w, req)
	})
}

// Close stops serving at once, closing open connections; images pushed to
// it are gone. Close is idempotent.
func (r *Registry) Close() error {
	r.closeOnce.Do(func() {
		err := r.srv.Close()
		if serveErr := <-r.done; !errors.Is(serveErr, http.ErrServerClosed) && err == nil {
			err = serveErr
		}
		if err != nil {
			r.closeErr = fmt.Errorf("close registry %s: %w", r.Addr, err)
		}
	})
	return r.closeErr
}

// Ref returns the reference of repository name (with an optional :tag or
// @digest) on this registry: "127.0.0.1:PORT/<name>".
func (r *Registry) Ref(name string) string { return r.Addr + "/" + name }

// Push uploads img as name ("busybox:latest"; a name without a tag gets
// ":latest") and returns its reference on this registry.
func (r *Registry) Push(ctx context.Context, repo string, img v1.Image) (string, error) {
	if !strings.Contains(repo, ":") && !strings.Contains(repo, "@") {
		repo += ":latest"
	}
	ref := r.Ref(repo)
	parsed, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("push %q: %w", ref, err)
	}
	opts := []remote.Option{remote.WithContext(ctx)}
	r.mu.Lock()
	for prefix, cred := range r.private {
		if strings.HasPrefix(repo, prefix) {
			opts = append(opts, remote.WithAuth(&authn.Basic{Username: cred[0], Password: cred[1]}))
		}
	}
	r.mu.Unlock()
	if err := remote.Write(parsed, img, opts...); err != nil {
		return "", fmt.Errorf("push %q: %w", ref, err)
	}
	return ref, nil
}

// PushDefaults pushes BusyboxImage as busybox:latest and PauseImage as
// pause:latest, the two images every harness containerd expects.
func (r *Registry) PushDefaults(ctx context.Context) error {
	bb, err := BusyboxImage()
	if err != nil {
		return err
	}
	pause, err := PauseImage()
	if err != nil {
		return err
	}
	if _, err := r.Push(ctx, BusyboxRepo, bb); err != nil {
		return err
	}
	if _, err := r.Push(ctx, PauseRepo, pause); err != nil {
		return err
	}
	return nil
}

// Names of the images a harness registry always holds.
const (
	BusyboxRepo = "busybox:latest"
	PauseRepo   = "pause:latest"
)
