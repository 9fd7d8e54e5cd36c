package cri

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Streaming is the CRI's streaming part: each call asks the runtime to
// prepare a session and returns the URL of its streaming server, which the
// caller proxies the client's SPDY or WebSocket connection to. None of them
// changes a container by itself: what runs there is the user's command.
type Streaming interface {
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (string, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (string, error)
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (string, error)
}

// Stats is the CRI's statistics part (reads only).
type Stats interface {
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error)
}

// Exec prepares a streaming exec and returns its URL.
func (c *Client) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (string, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	r, err := c.rt.Exec(ctx, req)
	if err != nil {
		return "", c.err("Exec", req.GetContainerId(), err)
	}
	return r.GetUrl(), nil
}

// Attach prepares a streaming attach and returns its URL.
func (c *Client) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (string, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	r, err := c.rt.Attach(ctx, req)
	if err != nil {
		return "", c.err("Attach", req.GetContainerId(), err)
	}
	return r.GetUrl(), nil
}

// PortForward prepares a port-forward session into a sandbox and returns its
// URL.
func (c *Client) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (string, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	r, err := c.rt.PortForward(ctx, req)
	if err != nil {
		return "", c.err("PortForward", req.GetPodSandboxId(), err)
	}
	return r.GetUrl(), nil
}

// ReopenContainerLog asks the runtime to reopen a container's log file at its
// path, after the caller renamed it away (log rotation). It changes only the
// runtime's file handle, never the container.
func (c *Client) ReopenContainerLog(ctx context.Context, containerID string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: containerID})
	return c.err("ReopenContainerLog", containerID, err)
}
