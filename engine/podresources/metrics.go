package podresources

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// counters are kubelet's pod-resources series (pkg/kubelet/metrics), with
// its names, help and label server_api_version. The error counters of List
// and GetAllocatableResources exist, as in kubelet, and never count: those
// calls do not fail.
type counters struct {
	total, list, getAllocatable, get            *prometheus.CounterVec
	listErrors, getAllocatableErrors, getErrors *prometheus.CounterVec
}

func newCounters(reg prometheus.Registerer) (*counters, error) {
	vec := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kubelet_" + name, Help: "[ALPHA] " + help},
			[]string{"server_api_version"})
	}
	m := &counters{
		total:                vec("pod_resources_endpoint_requests_total", "Cumulative number of requests to the PodResource endpoint. Broken down by server api version."),
		list:                 vec("pod_resources_endpoint_requests_list", "Number of requests to the PodResource List endpoint. Broken down by server api version."),
		getAllocatable:       vec("pod_resources_endpoint_requests_get_allocatable", "Number of requests to the PodResource GetAllocatableResources endpoint. Broken down by server api version."),
		get:                  vec("pod_resources_endpoint_requests_get", "Number of requests to the PodResource Get endpoint. Broken down by server api version."),
		listErrors:           vec("pod_resources_endpoint_errors_list", "Number of requests to the PodResource List endpoint which returned error. Broken down by server api version."),
		getAllocatableErrors: vec("pod_resources_endpoint_errors_get_allocatable", "Number of requests to the PodResource GetAllocatableResources endpoint which returned error. Broken down by server api version."),
		getErrors:            vec("pod_resources_endpoint_errors_get", "Number of requests to the PodResource Get endpoint which returned error. Broken down by server api version."),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.total, m.list, m.getAllocatable, m.get, m.listErrors, m.getAllocatableErrors, m.getErrors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register pod-resources metrics: %w", err)
		}
	}
	return m, nil
}

// requests counts a call of version: the total and, unless nil, its
// method's counter.
func (m *counters) requests(version string, method *prometheus.CounterVec) {
	m.total.WithLabelValues(version).Inc()
	if method != nil {
		method.WithLabelValues(version).Inc()
	}
}
