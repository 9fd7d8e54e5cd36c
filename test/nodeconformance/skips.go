package nodeconformance

import (
	"regexp"
	"sort"
	"strings"
)

// SkipReason is a spec this machine cannot run, by exact name, with why.
type SkipReason struct {
	Spec, Reason string
}

// Skips are the [NodeConformance] specs of common/node and common/storage
// that are not run, each with its reason. Beyond these only [Serial],
// [Disruptive] and [Flaky] specs are left out (none of the selected files
// has one in v1.34.4).
var Skips = []SkipReason{
	{"[sig-node] Pods should have their auto-restart back-off timer reset on image update [Slow] [NodeConformance]",
		"the spec switches the container to the nginx image (e2e-test-images/nginx:1.14-4), which is not built here (no static nginx in Debian): the pull fails on every node"},
	{"[sig-node] PrivilegedPod [NodeConformance] should enable privileged commands [LinuxOnly]",
		"the spec adds a dummy network link (ip link add dummy1 type dummy); this machine's kernel has no dummy link type (\"Unknown device type\"), so it fails on every node"},
	{"[sig-node] ConfigMap should be consumable via the environment [NodeConformance] [Conformance]",
		"the spec prints `env` from busybox sh and expects variables named data-1; Debian's busybox 1.35 (the only busybox here) drops variables whose names are not shell names when it runs a command, the suite's busybox 1.37 keeps them: it fails on every node"},
	{"[sig-node] Secrets should be consumable via the environment [NodeConformance] [Conformance]",
		"the spec prints `env` from busybox sh and expects variables named data-1; Debian's busybox 1.35 (the only busybox here) drops variables whose names are not shell names when it runs a command, the suite's busybox 1.37 keeps them: it fails on every node"},
}

// excluded is the --ginkgo.skip regexp: [Serial], [Disruptive], [Flaky] and
// every spec of Skips.
func excluded() string {
	parts := []string{`\[Serial\]`, `\[Disruptive\]`, `\[Flaky\]`}
	for _, s := range Skips {
		parts = append(parts, ExactName(s.Spec))
	}
	return strings.Join(parts, "|")
}

// ExactName is a Ginkgo focus or skip regexp that matches spec name and
// nothing longer. Ginkgo matches these against the suite's description, a
// space and the spec's full name, so the name is anchored at its end and
// after a space.
func ExactName(name string) string {
	return " " + regexp.QuoteMeta(name) + "$"
}

// skipReason returns the reason Skips gives for spec, if any.
func skipReason(spec string) (string, bool) {
	for _, s := range Skips {
		if s.Spec == spec {
			return s.Reason, true
		}
	}
	return "", false
}

// WithSkips returns specs with every spec of Skips as Skip with its reason
// (replacing a verdict of the same spec, from a run that did not skip it).
func WithSkips(specs []Spec) []Spec {
	var out []Spec
	for _, s := range specs {
		if _, ok := skipReason(s.Name); !ok {
			out = append(out, s)
		}
	}
	for _, s := range Skips {
		out = append(out, Spec{Name: s.Spec, Verdict: Skip, Message: s.Reason})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
