// Package apierr names the API server's failures plainly and logs a run of
// them once: the node's writes (pod status, Node status, Lease) retry with
// backoff, and a dead API server or a refused credential must not flood
// the log.
//
// Contracts:
//   - Describe wraps err with what it means for a node: the API server is
//     unreachable (connection refused, a timeout, DNS), its certificate is
//     not trusted, the credential was refused (401: an expired or invalid
//     token or client certificate) or the node is not allowed (403).
//   - Once.Fail logs at Error the first failure of a run and each change of
//     its kind (unreachable, untrusted, unauthorized, forbidden, other);
//     further failures of the same kind are counted, not logged. Once.OK
//     ends the run, logging at Info how many failures it held.
package apierr

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Kind classifies err: "unreachable", "untrusted", "unauthorized",
// "forbidden" or "other".
func Kind(err error) string {
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case apierrors.IsUnauthorized(err):
		return "unauthorized"
	case apierrors.IsForbidden(err):
		return "forbidden"
	case errors.As(err, &unknownAuthority), errors.As(err, &hostname):
		return "untrusted"
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err),
		errors.As(err, &dnsErr), errors.As(err, &netErr):
		return "unreachable"
	}
	return "other"
}

// Describe wraps err with its meaning (Kind) for a node; other errors are
// returned as they are.
func Describe(err error) error {
	switch Kind(err) {
	case "unauthorized":
		return fmt.Errorf("the API server refused the node's credentials (401 Unauthorized: an expired or invalid token or client certificate in --kubeconfig): %w", err)
	case "forbidden":
		return fmt.Errorf("the API server forbids it (403: the node must authenticate as system:node:<node-name> in group system:nodes): %w", err)
	case "untrusted":
		return fmt.Errorf("the API server's certificate is not trusted (check --kubeconfig's certificate-authority and server): %w", err)
	case "unreachable":
		return fmt.Errorf("the API server is unreachable (check --kubeconfig's server; retrying): %w", err)
	}
	return err
}

// Once logs runs of failures of one activity once (package doc).
type Once struct {
	Log  *slog.Logger
	What string // the activity, e.g. "write pod status"

	mu      sync.Mutex
	failing string // the kind of the current run, "" when none
	held    int    // failures not logged in this run
}

// Fail records a failure; attrs are logged with the first of a run.
func (o *Once) Fail(err error, attrs ...any) {
	kind := Kind(err)
	o.mu.Lock()
	if o.failing == kind {
		o.held++
		o.mu.Unlock()
		return
	}
	o.failing = kind
	o.mu.Unlock()
	o.Log.Error(o.What+" failed; retrying with backoff (further failures of this kind are not logged until one succeeds)",
		append(attrs, "err", Describe(err))...)
}

// OK ends a run of failures.
func (o *Once) OK() {
	o.mu.Lock()
	kind, held := o.failing, o.held
	o.failing, o.held = "", 0
	o.mu.Unlock()
	if kind != "" {
		o.Log.Info(o.What+" succeeds again", "failures-not-logged", held)
	}
}
