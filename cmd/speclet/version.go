package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// kubernetesVersion is the Kubernetes release whose kubelet speclet
// follows (the oracle of its behaviour and of its conformance runs).
const kubernetesVersion = "v1.34.4"

// buildVersion is speclet's own version, set at build time:
//
//	go build -ldflags "-X main.buildVersion=$(git describe --tags --always --dirty)" ./cmd/speclet
//
// The Makefile's builds of cmd/speclet set it.
var buildVersion string

func init() {
	register("version", "print the version", func([]string) int {
		fmt.Println("speclet", specletVersion())
		return 0
	})
}

// specletVersion is the version speclet reports everywhere (`speclet
// version`, the start log, the Node's status.nodeInfo.kubeletVersion and
// the User-Agent of its API clients): kubernetesVersion with speclet's
// own version as build metadata, v1.34.4+speclet.<version>, always a valid
// semantic version. <version> is buildVersion, else the commit the binary
// was built from (the build info's vcs.revision, 12 digits, -dirty when
// the tree had changes), else devel.
func specletVersion() string {
	v := buildVersion
	if v == "" {
		v = "devel"
		if bi, ok := debug.ReadBuildInfo(); ok {
			v = vcsVersion(bi.Settings)
		}
	}
	return kubernetesVersion + "+speclet." + buildMetadata(v)
}

// vcsVersion is the short commit of the build settings, or devel.
func vcsVersion(settings []debug.BuildSetting) string {
	rev, dirty := "", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// buildMetadata makes v semver build metadata: dot-separated non-empty
// identifiers of [0-9A-Za-z-]; any other character becomes '-'.
func buildMetadata(v string) string {
	var ids []string
	for _, id := range strings.Split(v, ".") {
		id = strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' {
				return r
			}
			return '-'
		}, id)
		if id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return "devel"
	}
	return strings.Join(ids, ".")
}
