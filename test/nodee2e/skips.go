package nodee2e

import (
	"sort"
	"strings"

	nc "github.com/speclet/speclet/test/nodeconformance"
)

// Skips are the [NodeConformance] specs of e2e_node.test that are not run,
// each with its reason: specs no node on this machine passes, kubelet's
// included. e2e_node.test holds the specs of test/e2e/common too, so the
// node conformance run's Skips (nodeconformance.Skips) are skipped here as
// well, for the same reasons.
var Skips = append(append([]nc.SkipReason{}, nc.Skips...), []nc.SkipReason{
	{Spec: "[sig-node] POD Resources API [Serial] [Feature:PodResourcesAPI] when querying /metrics [NodeConformance] should report the values for the podresources metrics",
		Reason: "the spec restarts the node agent through its systemd unit (systemctl list-units '*kubelet*', a unit named kubelet-*); this machine runs no systemd (no /run/systemd/system), so no node here has such a unit"},
}...)

// excluded is the --ginkgo.skip regexp: [Disruptive], [Flaky] and every
// spec of Skips ([Serial] is the label filter's).
func excluded() string {
	parts := []string{`\[Disruptive\]`, `\[Flaky\]`}
	for _, s := range Skips {
		parts = append(parts, nc.ExactName(s.Spec))
	}
	return strings.Join(parts, "|")
}

// WithSkips returns specs with every spec of skips that the selection of a
// pass holds (sel reports whether a spec name is selected: its serial
// specs, or the others) as Skip with its reason.
func WithSkips(specs []nc.Spec, sel func(name string) bool) []nc.Spec {
	skip := map[string]string{}
	for _, s := range Skips {
		if sel(s.Spec) {
			skip[s.Spec] = s.Reason
		}
	}
	var out []nc.Spec
	for _, s := range specs {
		if _, ok := skip[s.Name]; !ok {
			out = append(out, s)
		}
	}
	for name, reason := range skip {
		out = append(out, nc.Spec{Name: name, Verdict: nc.Skip, Message: reason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// IsSerial reports whether a spec belongs to the serial pass.
func IsSerial(name string) bool { return strings.Contains(name, "[Serial]") }
