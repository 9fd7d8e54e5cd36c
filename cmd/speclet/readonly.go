package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/kubeletapi"
	"github.com/speclet/speclet/engine/server"
)

// readOnlyMux is the read-only server's handler: engine/server's paths,
// /spec/graph, stats' (kubelet's /stats/summary, /metrics/cadvisor,
// /metrics/resource and /metrics/probes, readOnlyStats), and, with --enable-profiling, the Go runtime's profiles
// under /debug/pprof/ (as kubelet's enableProfilingHandler serves them;
// kubelet serves them behind its authenticated port, which is why they are
// off by default here).
func readOnlyMux(o *runOptions, eng *engine.Engine, reg *prometheus.Registry, stats http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/", server.Handler(eng, reg))
	if stats != nil {
		for _, p := range []string{"GET /stats/summary", "GET /metrics/cadvisor", "GET /metrics/resource", "GET /metrics/probes"} {
			mux.Handle(p, stats)
		}
	}
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

// readOnlyStats is the kubelet API's stats routes without authentication,
// as kubelet's read-only port serves them: the same runtime (audited and
// metered), labels and root dir as the authenticated API's, and its
// housekeeping passes (stats).
func readOnlyStats(o *runOptions, eng *engine.Engine, rt cri.Full, probes prometheus.Gatherer, stats *kubeletapi.StatsCache, log *slog.Logger) (http.Handler, error) {
	api, err := kubeletapi.New(kubeletapi.Config{Host: eng, Runtime: rt, NodeName: o.nodeName, RootDir: o.rootDir, PodLogsDir: o.podLogsDir, SystemCgroups: o.node.systemContainers(),
		Authorizer: kubeletapi.AlwaysAllow{}, Probes: probes, Stats: stats, Log: log,
		Labels: kubeletapi.Labels{PodUID: engine.LabelPodUID, PodName: engine.LabelPodName,
			PodNamespace: engine.LabelPodNamespace, ContainerName: engine.LabelContainerName},
		Fallback: kubeletapi.Labels{PodUID: engine.KubeletLabelPodUID, PodName: engine.KubeletLabelPodName,
			PodNamespace: engine.KubeletLabelPodNamespace, ContainerName: engine.KubeletLabelContainerName}})
	if err != nil {
		return nil, fmt.Errorf("read-only stats: %w", err)
	}
	return api.ReadOnlyHandler(), nil
}
