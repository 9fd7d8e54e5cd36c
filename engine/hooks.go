package engine

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

// Lifecycle hooks (kubelet kuberuntime_container.go startContainer and
// killContainer):
//
//   - postStart runs right after StartContainer; the container counts as
//     started only when it returned. When it fails the container is killed
//     (its preStop runs too, as in kubelet) and start_failed is raised with
//     the waiting reason PostStartHookError; the restart policy decides.
//   - preStop runs once per running instance before its StopContainer,
//     bounded by the grace period; the seconds it took are subtracted from
//     the grace given to StopContainer, which gets at least
//     minGraceAfterPreStop seconds. A failing preStop is logged and the stop
//     goes on.
//
// Handlers: exec (CRI ExecSync; a non-zero exit code is a failure), httpGet
// (a response outside 200-399 is a failure; the host defaults to the pod IP)
// and sleep (on the engine's clock). tcpSocket is not a valid hook and is
// ignored.

// ReasonPostStartHookError is the waiting reason of a container whose
// postStart hook failed, kubelet's ErrPostStartHook.
const ReasonPostStartHookError = "PostStartHookError"

// minGraceAfterPreStop is kubelet's minimumGracePeriodInSeconds: a container
// whose preStop ate its grace period still gets this long after SIGTERM.
const minGraceAfterPreStop = 2

// hookHTTP sends httpGet hooks. Redirects are not followed: a 3xx answer
// counts as success, and an HTTPS hook does not verify the container's
// certificate, as in kubelet's handler runner (its probes' transport).
var hookHTTP = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport: &http.Transport{Proxy: nil,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // kubelet's hooks skip verification
}

func (c *ctrState) postStartHook() *v1.LifecycleHandler {
	if c.spec == nil || c.spec.Lifecycle == nil {
		return nil
	}
	return c.spec.Lifecycle.PostStart
}

func (c *ctrState) preStopHook() *v1.LifecycleHandler {
	if c.spec == nil || c.spec.Lifecycle == nil {
		return nil
	}
	return c.spec.Lifecycle.PreStop
}

// hookTarget is what a hook needs of its container, copied so that a hook
// left running past its bound reads nothing the worker changes.
type hookTarget struct {
	rt    cri.Runtime
	clock clock.Clock
	id    string // the instance
	name  string
	podIP string
	spec  *v1.Container
}

func (c *ctrState) hookTarget() hookTarget {
	return hookTarget{rt: c.p.e.rt, clock: c.p.e.clock, id: c.id, name: c.name, podIP: c.p.sandbox.podIP, spec: c.spec}
}

// runHook runs handler h of kind ("PostStart", "PreStop") in the instance.
// timeout bounds it (0: only ctx does).
func (c hookTarget) runHook(ctx context.Context, kind string, h *v1.LifecycleHandler, timeout time.Duration) error {
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
		return fmt.Errorf("%s hook of container %q: %w", kind, c.name, err)
	}
	return nil
}

func (c hookTarget) execHook(ctx context.Context, h *v1.ExecAction, timeout time.Duration) error {
	r, err := c.rt.ExecSync(ctx, c.id, h.Command, timeout)
	if err != nil {
		return fmt.Errorf("exec %q: %w", h.Command, err)
	}
	if r.ExitCode != 0 {
		out := strings.TrimSpace(string(r.Stdout) + string(r.Stderr))
		return fmt.Errorf("command %q exited with %d: %s", h.Command, r.ExitCode, out)
	}
	return nil
}

func (c hookTarget) httpHook(ctx context.Context, h *v1.HTTPGetAction, timeout time.Duration) error {
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

func (c hookTarget) sleepHook(ctx context.Context, h *v1.SleepAction, timeout time.Duration) error {
	d := time.Duration(h.Seconds) * time.Second
	if timeout > 0 && timeout < d {
		d = timeout
	}
	select {
	case <-c.clock.After(d):
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

// runPreStop runs the preStop hook of the current instance if it has one,
// the instance was started and its hook has not run yet, bounded by grace
// seconds. It returns the grace left for StopContainer.
func (c *ctrState) runPreStop(ctx context.Context, grace int64) int64 {
	h := c.preStopHook()
	if h == nil || c.preStopDone == c.id || grace <= 0 {
		return grace
	}
	c.preStopDone = c.id
	clk := c.p.e.clock
	start := clk.Now()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	target := c.hookTarget()
	go func() { done <- target.runHook(hctx, "PreStop", h, time.Duration(grace)*time.Second) }()
	t := clk.NewTimer(time.Duration(grace) * time.Second)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			c.p.e.log.Warn("FailedPreStopHook", "pod", c.p.key(), "container", c.name, "err", err)
			c.event(eventWarning, "FailedPreStopHook", "PreStopHook failed: %v", err)
		}
	case <-t.C():
		msg := fmt.Sprintf("PreStop hook of container %q did not finish within %ds", c.name, grace)
		c.p.e.log.Warn("FailedPreStopHook", "pod", c.p.key(), "container", c.name, "err", msg)
		c.event(eventWarning, "FailedPreStopHook", "%s", msg)
	}
	left := grace - int64(clk.Since(start)/time.Second)
	return max(left, minGraceAfterPreStop)
}
