package nodeconformance

import (
	"regexp"
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
var Skips = []SkipReason{}

// excluded is the --ginkgo.skip regexp: [Serial], [Disruptive], [Flaky] and
// every spec of Skips.
func excluded() string {
	parts := []string{`\[Serial\]`, `\[Disruptive\]`, `\[Flaky\]`}
	for _, s := range Skips {
		parts = append(parts, "^"+regexp.QuoteMeta(s.Spec)+"$")
	}
	return strings.Join(parts, "|")
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
