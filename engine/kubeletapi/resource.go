package kubeletapi

import (
	"fmt"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/speclet/speclet/fsm"
)

// statsRoutes are the routes kubelet serves on both ports: the stats
// summary and the cAdvisor, resource and probe series.
func (a *API) statsRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /stats/summary", tagged(fsm.HandlerKubeletApiStatsSummary, a.statsSummary))
	m.HandleFunc("GET /metrics/resource", tagged(fsm.HandlerKubeletApiMetricsResource, a.metricsResource))
	m.HandleFunc("GET /metrics/cadvisor", tagged(fsm.HandlerKubeletApiMetricsCadvisor, a.metricsCadvisor))
	if a.c.Probes != nil {
		m.Handle("GET /metrics/probes", promhttp.HandlerFor(a.c.Probes, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	}
}

// ReadOnlyHandler serves, without authentication, what kubelet's
// read-only port serves of this API: GET /stats/summary,
// /metrics/cadvisor, /metrics/resource and /metrics/probes; other paths
// are 404.
func (a *API) ReadOnlyHandler() http.Handler {
	m := http.NewServeMux()
	a.statsRoutes(m)
	return m
}

// metricsResource serves /metrics/resource in the Prometheus text format
// metrics-server reads: node, pod and container CPU seconds and memory
// working set, container start times, each sample with its time.
func (a *API) metricsResource(w http.ResponseWriter, r *http.Request) {
	s, err := a.summary(r.Context())
	var b strings.Builder
	scrapeErr := 0
	if err != nil {
		scrapeErr = 1
		s = &statsapi.Summary{}
	}
	ms := func(t metav1.Time) int64 { return t.UnixMilli() }
	help := func(name, typ, text string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, typ)
	}
	help("container_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the container in core-seconds")
	for _, p := range s.Pods {
		for _, c := range p.Containers {
			if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
				fmt.Fprintf(&b, "container_cpu_usage_seconds_total{container=%q,namespace=%q,pod=%q} %g %d\n", c.Name, p.PodRef.Namespace, p.PodRef.Name,
					float64(*c.CPU.UsageCoreNanoSeconds)/1e9, ms(c.CPU.Time))
			}
		}
	}
	help("container_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the container in bytes")
	for _, p := range s.Pods {
		for _, c := range p.Containers {
			if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
				fmt.Fprintf(&b, "container_memory_working_set_bytes{container=%q,namespace=%q,pod=%q} %d %d\n", c.Name, p.PodRef.Namespace, p.PodRef.Name,
					*c.Memory.WorkingSetBytes, ms(c.Memory.Time))
			}
		}
	}
	help("container_start_time_seconds", "gauge", "[STABLE] Start time of the container since unix epoch in seconds")
	for _, p := range s.Pods {
		for _, c := range p.Containers {
			fmt.Fprintf(&b, "container_start_time_seconds{container=%q,namespace=%q,pod=%q} %d\n", c.Name, p.PodRef.Namespace, p.PodRef.Name, c.StartTime.Unix())
		}
	}
	help("node_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the node in core-seconds")
	if c := s.Node.CPU; c != nil && c.UsageCoreNanoSeconds != nil {
		fmt.Fprintf(&b, "node_cpu_usage_seconds_total %g %d\n", float64(*c.UsageCoreNanoSeconds)/1e9, ms(c.Time))
	}
	help("node_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the node in bytes")
	if m := s.Node.Memory; m != nil && m.WorkingSetBytes != nil {
		fmt.Fprintf(&b, "node_memory_working_set_bytes %d %d\n", *m.WorkingSetBytes, ms(m.Time))
	}
	help("pod_cpu_usage_seconds_total", "counter", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds")
	for _, p := range s.Pods {
		if p.CPU != nil && p.CPU.UsageCoreNanoSeconds != nil {
			fmt.Fprintf(&b, "pod_cpu_usage_seconds_total{namespace=%q,pod=%q} %g %d\n", p.PodRef.Namespace, p.PodRef.Name, float64(*p.CPU.UsageCoreNanoSeconds)/1e9, ms(p.CPU.Time))
		}
	}
	help("pod_memory_working_set_bytes", "gauge", "[STABLE] Current working set of the pod in bytes")
	for _, p := range s.Pods {
		if p.Memory != nil && p.Memory.WorkingSetBytes != nil {
			fmt.Fprintf(&b, "pod_memory_working_set_bytes{namespace=%q,pod=%q} %d %d\n", p.PodRef.Namespace, p.PodRef.Name, *p.Memory.WorkingSetBytes, ms(p.Memory.Time))
		}
	}
	help("resource_scrape_error", "gauge", "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise")
	fmt.Fprintf(&b, "resource_scrape_error %d\n", scrapeErr)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}
