package test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/engine"
)

// TestDashboardQueriesExportedMetrics: every metric a panel of
// docs/dashboards/speclet.json queries is one the daemon's registry
// exports (the engine's and the runtime decorator's).
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("../docs/dashboards/speclet.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("docs/dashboards/speclet.json: %v", err)
	}
	reg := &describing{Registerer: prometheus.NewRegistry()}
	srv, err := sim.Start(t.TempDir(), sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	client, err := cri.Dial(t.Context(), srv.Endpoint, cri.WithMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := engine.New(engine.Config{Runtime: client, RootDir: t.TempDir(), Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	exported := reg.names()
	name := regexp.MustCompile(`\bspeclet_[a-z_]+`)
	queried := 0
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				queried++
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
				if !exported[base] {
					t.Errorf("panel %q queries %s, which speclet does not export", p.Title, m)
				}
			}
		}
	}
	if queried < 10 {
		t.Errorf("the dashboard queries %d metrics; expected the machines, pod start, runtime and PLEG panels", queried)
	}
}

// describing is a Registerer that remembers the metric names of every
// collector registered with it, series or not.
type describing struct {
	prometheus.Registerer
	cs []prometheus.Collector
}

func (d *describing) Register(c prometheus.Collector) error {
	d.cs = append(d.cs, c)
	return d.Registerer.Register(c)
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

func (d *describing) names() map[string]bool {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range d.cs {
			c.Describe(ch)
		}
		close(ch)
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	out := map[string]bool{}
	for desc := range ch {
		if m := fq.FindStringSubmatch(desc.String()); m != nil {
			out[m[1]] = true
		}
	}
	return out
}
