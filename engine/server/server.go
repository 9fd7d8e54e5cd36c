// Package server is speclet's read-only HTTP endpoint, like kubelet's
// read-only port: GET /pods (a v1 PodList in JSON), GET /healthz and
// GET /metrics.
//
// Usage:
//
//	srv := &http.Server{Addr: "127.0.0.1:10255", Handler: server.Handler(eng, registry)}
//	go srv.ListenAndServe()
//
// It depends only on the small Node interface, not on the engine.
package server

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Node is what the server shows.
type Node interface {
	// Pods returns the pods the node runs with their current status; the
	// server does not modify them.
	Pods() []*v1.Pod
	// Healthz returns nil when the node is healthy, or why it is not.
	Healthz() error
}

// Handler serves GET /pods, GET /healthz and, when gatherer is not nil,
// GET /metrics from gatherer. Other methods get 405, other paths 404.
func Handler(node Node, gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) {
		list := v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: []v1.Pod{}}
		for _, p := range node.Pods() {
			list.Items = append(list.Items, *p)
		}
		body, err := json.Marshal(&list)
		if err != nil {
			http.Error(w, "encode pods: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := node.Healthz(); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(err.Error() + "\n"))
			return
		}
		w.Write([]byte("ok"))
	})
	if gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	}
	return mux
}
