package main

import (
	"errors"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/gen"
	"github.com/speclet/speclet/spec"
)

// The daemon's GET /spec/graph: the built-in spec's state graph of one
// machine, and with &pod=UID|NAME the pod's current state highlighted and
// the transitions its kept history took marked with their counts.

// builtinSpec is the spec compiled into the binary, parsed once.
var builtinSpec = sync.OnceValues(func() (*spec.Spec, error) {
	s, diags := spec.Parse(spec.Embedded())
	if diags.HasErrors() {
		return nil, errors.New(diags.Error())
	}
	return s, nil
})

// graphHandler serves GET /spec/graph?machine=NAME&format=dot|mermaid|svg
// [&pod=UID|NAME[&container=NAME]].
func graphHandler(eng *engine.Engine) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := builtinSpec()
		if err != nil {
			http.Error(w, "spec: "+err.Error(), http.StatusInternalServerError)
			return
		}
		q := r.URL.Query()
		name := q.Get("machine")
		m := s.Machine(name)
		if m == nil {
			var names []string
			for _, mm := range s.Machines {
				names = append(names, mm.Name)
			}
			sort.Strings(names)
			http.Error(w, "machine="+name+": want one of "+strings.Join(names, ", "), http.StatusBadRequest)
			return
		}
		var h *gen.Highlight
		if key := q.Get("pod"); key != "" {
			p, ok := eng.PodHistory(key)
			if !ok {
				http.Error(w, "no pod "+key, http.StatusNotFound)
				return
			}
			h = highlight(p, name, q.Get("container"))
		}
		var out []byte
		ctype := "text/plain; charset=utf-8"
		switch format := q.Get("format"); format {
		case "", "dot":
			out = gen.DOT(m)
			if h != nil {
				out = gen.DOTHighlight(m, *h)
			}
		case "mermaid":
			out = gen.Mermaid(m)
			if h != nil {
				out = gen.MermaidHighlight(m, *h)
			}
		case "svg":
			out = gen.SVG(m, h) // drawn in Go: no Graphviz needed at run time
			ctype = "image/svg+xml"
		default:
			http.Error(w, "format="+format+": want dot, mermaid or svg", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Write(out)
	}
}

// highlight is where machine (for a container machine: container, default
// the first container) of p is now and the rows its kept history took.
func highlight(p engine.PodDebug, machine, container string) *gen.Highlight {
	if machine == "container" && container == "" {
		for _, ms := range p.Machines {
			if ms.Machine == machine {
				container = ms.Instance
				break
			}
		}
	}
	h := &gen.Highlight{Taken: map[string]int{}}
	for _, ms := range p.Machines {
		if ms.Machine == machine && ms.Instance == container {
			h.Current = ms.State
		}
	}
	for _, t := range p.History {
		if t.Machine == machine && t.Instance == container {
			h.Taken[gen.TakenKey(t.From, t.Event, t.Guard)]++
		}
	}
	return h
}
