// Package server is speclet's read-only HTTP endpoint, like kubelet's
// read-only port: GET /pods (a v1 PodList in JSON), GET /healthz,
// GET /metrics, and, for a node that keeps them, GET /debug/pods (each pod's
// machines and their states) and GET /debug/pods/{uid or name} (with the
// transition history).
//
// Usage:
//
//	srv := &http.Server{Addr: "127.0.0.1:10255", Handler: server.Handler(eng, registry)}
//	go srv.ListenAndServe()
//
// It depends only on the small Node interface, not on the engine.
package server

import (
	_ "embed"
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

// uiPage is the web page on /ui: the pods and their machines, polled from
// /debug/pods every second; a click shows each machine on its live graph
// (/spec/graph, served by the daemon) and the pod's history. Everything it
// needs is in the page: no external network.
//
//go:embed ui/index.html
var uiPage []byte

// Debugger is what a node that keeps its machines' history shows under
// /debug; the values are encoded as JSON.
type Debugger interface {
	// DebugPods lists the pods with the state of each of their machines.
	DebugPods() any
	// DebugPod returns one pod, by UID or name, with its history.
	DebugPod(key string) (any, bool)
}

// Handler serves GET /pods, GET /healthz, GET /debug/pods when node is a
// Debugger, and, when gatherer is not nil, GET /metrics from gatherer.
// Other methods get 405, other paths 404.
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
	if d, ok := node.(Debugger); ok {
		mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write(uiPage)
		})
		mux.HandleFunc("GET /debug/pods", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, d.DebugPods())
		})
		mux.HandleFunc("GET /debug/pods/{key...}", func(w http.ResponseWriter, r *http.Request) {
			v, ok := d.DebugPod(r.PathValue("key"))
			if !ok {
				http.Error(w, "no pod "+r.PathValue("key"), http.StatusNotFound)
				return
			}
			writeJSON(w, v)
		})
	}
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(body, '\n'))
}
