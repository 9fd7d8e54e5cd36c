package main

import (
	"runtime/debug"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// TestSpecletVersionIsSemver: whatever the build sets as speclet's own
// version (a git describe, a branch-like string, nothing), the version
// speclet reports parses as a semantic version of Kubernetes 1.34.4 with
// speclet's version as build metadata.
func TestSpecletVersionIsSemver(t *testing.T) {
	defer func(v string) { buildVersion = v }(buildVersion)
	for _, c := range []struct{ build, meta string }{
		{"4d9a16e", "speclet.4d9a16e"},
		{"4d9a16e-dirty", "speclet.4d9a16e-dirty"},
		{"v0.3.0-12-g4d9a16e", "speclet.v0.3.0-12-g4d9a16e"},
		{"release/1.2_rc", "speclet.release-1.2-rc"},
		{"..", "speclet.devel"},
		{"", ""}, // the build info's commit, or devel
	} {
		buildVersion = c.build
		got := specletVersion()
		v, err := version.ParseSemantic(got)
		if err != nil {
			t.Errorf("build version %q: specletVersion() = %q, not a semantic version: %v", c.build, got, err)
			continue
		}
		if v.Major() != 1 || v.Minor() != 34 || v.Patch() != 4 || v.PreRelease() != "" {
			t.Errorf("build version %q: specletVersion() = %q, want 1.34.4 without a pre-release", c.build, got)
		}
		if c.meta != "" && v.BuildMetadata() != c.meta {
			t.Errorf("build version %q: build metadata %q, want %q", c.build, v.BuildMetadata(), c.meta)
		}
		if !strings.HasPrefix(v.BuildMetadata(), "speclet.") {
			t.Errorf("build version %q: build metadata %q, want speclet.<version>", c.build, v.BuildMetadata())
		}
	}
	if got := vcsVersion([]debug.BuildSetting{{Key: "vcs.revision", Value: "4d9a16e0123456789abcdef0123456789abcdef0"}, {Key: "vcs.modified", Value: "true"}}); got != "4d9a16e01234-dirty" {
		t.Errorf("vcsVersion of a modified tree = %q, want 4d9a16e01234-dirty", got)
	}
	if got := vcsVersion(nil); got != "devel" {
		t.Errorf("vcsVersion without vcs settings = %q, want devel", got)
	}
}
