package nodeconformance

import (
	"context"
	"io"
	"path/filepath"

	"github.com/speclet/speclet/test/kubebuild"
)

// DefaultVersion is the k8s.io/kubernetes version whose e2e suite, images
// and kubelet the node conformance run uses.
const DefaultVersion = "v1.34.4"

// e2eBuild is the cache directory of the suite's binaries:
// $HOME/.cache/speclet/e2e/<version>/{e2e.test,e2e_node.test,ginkgo,agnhost,nonewprivs}.
var e2eBuild = func(version string) kubebuild.Options {
	return kubebuild.Options{
		Set:     "e2e",
		Version: version,
		Tests:   []string{"k8s.io/kubernetes/test/e2e_node", "k8s.io/kubernetes/test/e2e"},
		Programs: []string{
			"github.com/onsi/ginkgo/v2/ginkgo",
			"k8s.io/kubernetes/test/images/agnhost",
			"k8s.io/kubernetes/test/images/nonewprivs",
		},
		// The agnhost image holds porter's test certificate: netexec
		// serves HTTPS with it (the lifecycle hook specs).
		Files: []string{"test/images/agnhost/porter/localhost.crt", "test/images/agnhost/porter/localhost.key"},
	}
}

// Binaries are the paths of the suite's binaries.
type Binaries struct {
	E2E string // e2e.test
	// E2ENode is e2e_node.test, the node e2e suite (test/e2e_node).
	E2ENode string
	Ginkgo  string // the ginkgo CLI at the version k8s.io/kubernetes pins
	Agnhost string // test/images/agnhost, static
	// Nonewprivs is test/images/nonewprivs (prints its effective uid).
	Nonewprivs string
	// LocalhostCrt and LocalhostKey are test/images/agnhost/porter's
	// certificate and key, /localhost.crt and /localhost.key of agnhost.
	LocalhostCrt, LocalhostKey string
}

// BuildBinaries builds (once, cached by version) e2e.test, the ginkgo CLI
// and agnhost of k8s.io/kubernetes at version. A cold build takes many
// minutes on two cores; a warm one is a stat.
func BuildBinaries(ctx context.Context, version string, log io.Writer) (Binaries, error) {
	o := e2eBuild(version)
	o.Log = log
	dir, err := kubebuild.Build(ctx, o)
	if err != nil {
		return Binaries{}, err
	}
	return Binaries{
		E2E:          filepath.Join(dir, "e2e.test"),
		E2ENode:      filepath.Join(dir, "e2e_node.test"),
		Ginkgo:       filepath.Join(dir, "ginkgo"),
		Agnhost:      filepath.Join(dir, "agnhost"),
		Nonewprivs:   filepath.Join(dir, "nonewprivs"),
		LocalhostCrt: filepath.Join(dir, "localhost.crt"),
		LocalhostKey: filepath.Join(dir, "localhost.key"),
	}, nil
}

// BinariesCached reports whether BuildBinaries would only stat.
func BinariesCached(version string) bool {
	return kubebuild.Cached(e2eBuild(version))
}
