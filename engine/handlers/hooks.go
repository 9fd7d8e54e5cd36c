// Package handlers runs the handlers kubelet runs against a container
// instance: lifecycle hooks (exec, httpGet, sleep; kubelet
// kuberuntime_container.go and lifecycle/handlers.go) and probes (exec,
// httpGet, tcpSocket, grpc; kubelet pkg/probe). The engine decides when they
// run and what their outcome means; a handler only reports it.
package handlers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
)

// Target is the container instance a handler runs against, copied from
// the engine's state so that a handler left running past its bound reads
// nothing the pod worker changes.
type Target struct {
	Runtime cri.Runtime
	Clock   clock.Clock
	ID      string // the instance
	Name    string // the container's name
	PodIP   string // the host of an httpGet, tcpSocket or grpc handler that names none
	Spec    *v1.Container
}

// hookHTTP sends httpGet hooks. Redirects are not followed: a 3xx answer
// counts as success, and an HTTPS hook does not verify the container's
// certificate, as in kubelet's handler runner (its probes' transport).
var hookHTTP = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport: &http.Transport{Proxy: nil,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // kubelet's hooks skip verification
}

// Hook runs lifecycle handler h of kind ("PostStart", "PreStop") in the
// instance; timeout bounds it (0: only ctx does). exec fails on a non-zero
// exit code; httpGet only when no answer comes (kubelet's runHTTPHandler
// does not read the status); sleep waits on the Clock; tcpSocket and an
// empty handler run nothing.
func (c Target) Hook(ctx context.Context, kind string, h *v1.LifecycleHandler, timeout time.Duration) error {
	var err error
	switch {
	case h.Exec != nil:
		err = c.execHook(ctx, h.Exec, timeout)
	case h.HTTPGet != nil:
		err = c.httpHook(ctx, h.HTTPGet, timeout)
	case h.Sleep != nil:
		err = c.sleepHook(ctx, h.Sleep, timeout)
	default:
		return nil // tcpSocket or an empty handler: nothing to run
	}
	if err != nil {
		return fmt.Errorf("%s hook of container %q: %w", kind, c.Name, err)
	}
	return nil
}

func (c Target) execHook(ctx context.Context, h *v1.ExecAction, timeout time.Duration) error {
	r, err := c.Runtime.ExecSync(ctx, c.ID, h.Command, timeout)
	if err != nil {
		return fmt.Errorf("exec %q: %w", h.Command, err)
	}
	if r.ExitCode != 0 {
		out := strings.TrimSpace(string(r.Stdout) + string(r.Stderr))
		return fmt.Errorf("command %q exited with %d: %s", h.Command, r.ExitCode, out)
	}
	return nil
}

func (c Target) httpHook(ctx context.Context, h *v1.HTTPGetAction, timeout time.Duration) error {
	u, err := c.httpURL(h)
	if err != nil {
		return fmt.Errorf("httpGet: %w", err)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("httpGet %s: %w", u, err)
	}
	for _, hd := range h.HTTPHeaders {
		if strings.EqualFold(hd.Name, "host") {
			req.Host = hd.Value
			continue
		}
		req.Header.Add(hd.Name, hd.Value)
	}
	resp, err := hookHTTP.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("httpGet %s: %w", u, err)
	}
	// kubelet's runHTTPHandler does not look at the status code: any
	// answer is a success, only a request that gets none fails.
	_ = resp.Body.Close()
	return nil
}

func (c Target) sleepHook(ctx context.Context, h *v1.SleepAction, timeout time.Duration) error {
	d := time.Duration(h.Seconds) * time.Second
	if timeout > 0 && timeout < d {
		d = timeout
	}
	select {
	case <-c.Clock.After(d):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sleep %ds: %w", h.Seconds, ctx.Err())
	}
}

// resolvePort returns a numeric port, or the containerPort of c's port of
// that name.
func resolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("port %d out of range", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("port %q: no container port of that name", p.StrVal)
}
