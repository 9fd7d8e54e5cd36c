package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/speclet/speclet/engine/server"
)

// healthzRetry is how long the healthz server waits before it listens
// again after a failed listen (kubelet's 5 s).
const healthzRetry = 5 * time.Second

// healthzMux serves GET and HEAD /healthz as the read-only server does
// (engine/server's handler: ok, or 500 and why not), and nothing else.
func healthzMux(node server.Node) http.Handler {
	h := server.Handler(node, nil)
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", h) // a GET pattern matches HEAD too
	return mux
}

// serveHealthz serves healthzMux on --healthz-bind-address:--healthz-port
// (plain HTTP, the read-only server's limits) until ctx ends. A listen
// that fails (the port is taken) does not stop the node: as kubelet's
// healthz server, it is logged and tried again every healthzRetry, in the
// background. It returns once ctx ended and the server is shut down.
func serveHealthz(ctx context.Context, o *runOptions, node server.Node, log *slog.Logger) {
	addr := net.JoinHostPort(o.healthzBindAddress, strconv.Itoa(o.healthzPort))
	lastErr := ""
	for {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			srv := server.New(l, healthzMux(node), server.DefaultLimits)
			log.Info("healthz server listening", "addr", "http://"+addr+"/healthz")
			done := make(chan error, 1)
			go func() { done <- srv.Serve() }()
			select {
			case <-ctx.Done():
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				srv.Shutdown(sctx)
				cancel()
				<-done
				return
			case err = <-done:
			}
		}
		// each new cause once, not one line every 5 s
		if msg := err.Error(); msg != lastErr {
			log.Error("healthz server: listen failed; trying again every 5s (--healthz-bind-address, --healthz-port)", "addr", addr, "err", err)
			lastErr = msg
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(healthzRetry):
		}
	}
}
