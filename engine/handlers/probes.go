package handlers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
)

// Probe handlers (kubelet pkg/probe/{exec,http,tcp,grpc}): each returns the
// probe's output and nil on success, or an error saying why it failed. A
// success may carry a warning as its output (ProbeWarning).

// maxProbeBody is how much of an httpGet answer kubelet reads for its
// message.
const maxProbeBody = 10 * 1024

// maxProbeRedirects is how many same-host redirects an httpGet probe
// follows (kubelet: 10).
const maxProbeRedirects = 10

// Probe runs one probe of p against the instance, bounded by timeout (the
// probe's timeoutSeconds).
func (c Target) Probe(ctx context.Context, p *v1.Probe, timeout time.Duration) (string, error) {
	switch {
	case p.Exec != nil:
		return c.execProbe(ctx, p.Exec.Command, timeout)
	case p.HTTPGet != nil:
		return c.httpProbe(ctx, p.HTTPGet, timeout)
	case p.TCPSocket != nil:
		return "", c.tcpProbe(ctx, p.TCPSocket, timeout)
	case p.GRPC != nil:
		return "", c.grpcProbe(ctx, p.GRPC, timeout)
	}
	return "", errors.New("probe has no handler")
}

func (c Target) execProbe(ctx context.Context, cmd []string, timeout time.Duration) (string, error) {
	r, err := c.Runtime.ExecSync(ctx, c.ID, cmd, timeout)
	if err != nil {
		if status.Code(errors.Unwrap(err)) == codes.DeadlineExceeded || strings.Contains(err.Error(), "DeadlineExceeded") {
			return "", fmt.Errorf("command %q timed out", cmd)
		}
		return "", fmt.Errorf("exec %q: %w", cmd, err)
	}
	out := strings.TrimSpace(string(r.Stdout) + string(r.Stderr))
	if r.ExitCode != 0 {
		return out, fmt.Errorf("command %q exited with %d: %s", cmd, r.ExitCode, out)
	}
	return "", nil
}

// httpURL is the URL an httpGet hook or probe asks: its host (the pod's IP
// when it names none), port (a number or a name of the container's ports),
// scheme and path.
func (c Target) httpURL(h *v1.HTTPGetAction) (string, error) {
	host, err := c.probeHost(h.Host)
	if err != nil {
		return "", err
	}
	port, err := resolvePort(h.Port, c.Spec)
	if err != nil {
		return "", err
	}
	scheme := "http"
	if h.Scheme == v1.URISchemeHTTPS {
		scheme = "https"
	}
	path := h.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + path, nil
}

func (c Target) probeHost(host string) (string, error) {
	if host == "" {
		host = c.PodIP
	}
	if host == "" {
		return "", errors.New("no host and the pod has no IP")
	}
	return host, nil
}

func (c Target) httpProbe(ctx context.Context, h *v1.HTTPGetAction, timeout time.Duration) (string, error) {
	u, err := c.httpURL(h)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("User-Agent", "kube-probe/1.34")
	req.Header.Set("Accept", "*/*")
	for _, hd := range h.HTTPHeaders {
		if strings.EqualFold(hd.Name, "host") {
			req.Host = hd.Value
			continue
		}
		req.Header.Set(hd.Name, hd.Value)
	}
	// kubelet follows redirects to the same host; a redirect elsewhere
	// ends the probe as a success with a warning.
	warning := ""
	client := &http.Client{
		Transport: probeTransport,
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if r.URL.Hostname() != via[0].URL.Hostname() {
				warning = "Probe terminated redirects"
				return http.ErrUseLastResponse
			}
			if len(via) >= maxProbeRedirects {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("Get %q: %w", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody))
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusBadRequest {
		return string(body), fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	if warning == "" && resp.StatusCode >= http.StatusMultipleChoices {
		warning = fmt.Sprintf("Probe terminated redirects, Response body: %s", body)
	}
	return warning, nil
}

// probeTransport keeps no idle connections (kubelet probes open a fresh
// connection each time, and a probe must not hold sockets between periods)
// and, like kubelet's, does not verify the certificate of an HTTPS probe.
var probeTransport = &http.Transport{DisableKeepAlives: true, Proxy: nil,
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // kubelet's probes skip verification

func (c Target) tcpProbe(ctx context.Context, t *v1.TCPSocketAction, timeout time.Duration) error {
	host, err := c.probeHost(t.Host)
	if err != nil {
		return err
	}
	port, err := resolvePort(t.Port, c.Spec)
	if err != nil {
		return err
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return conn.Close()
}

func (c Target) grpcProbe(ctx context.Context, g *v1.GRPCAction, timeout time.Duration) error {
	host, err := c.probeHost("")
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(g.Port)))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("GRPC probe %s: %w", addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	svc := ""
	if g.Service != nil {
		svc = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
	if err != nil {
		return fmt.Errorf("timeout: failed to connect service %q within %v: %w", addr, timeout, err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("service unhealthy (responded with %q)", resp.GetStatus())
	}
	return nil
}
