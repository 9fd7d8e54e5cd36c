package deviceplugin

import (
	"context"
	"io"
	"path/filepath"

	"github.com/speclet/speclet/test/kubebuild"
)

// DefaultVersion is the k8s.io/kubernetes version whose sample device
// plugin is built.
const DefaultVersion = "v1.34.4"

// sampleBuild is the plugin's build: one program, cached in
// $HOME/.cache/speclet/sample-device-plugin/<version>/.
func sampleBuild(version string) kubebuild.Options {
	return kubebuild.Options{
		Set:      "sample-device-plugin",
		Version:  version,
		Programs: []string{"k8s.io/kubernetes/test/images/sample-device-plugin"},
	}
}

// BuildSample builds the sample device plugin of k8s.io/kubernetes at
// version (once; a cached binary is a stat) and returns its path. A cold
// build takes minutes on two cores.
func BuildSample(ctx context.Context, version string, log io.Writer) (string, error) {
	o := sampleBuild(version)
	o.Log = log
	dir, err := kubebuild.Build(ctx, o)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "sample-device-plugin"), nil
}

// SampleCached reports whether BuildSample would only stat.
func SampleCached(version string) bool { return kubebuild.Cached(sampleBuild(version)) }
