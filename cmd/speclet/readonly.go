package main

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/server"
)

// readOnlyMux is the read-only server's handler: engine/server's paths,
// /spec/graph, and, with --enable-profiling, the Go runtime's profiles
// under /debug/pprof/ (as kubelet's enableProfilingHandler serves them;
// kubelet serves them behind its authenticated port, which is why they are
// off by default here).
func readOnlyMux(o *runOptions, eng *engine.Engine, reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/", server.Handler(eng, reg))
	mux.Handle("GET /spec/graph", graphHandler(eng))
	if o.enableProfiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}
