// Command buildnodeconf builds the binaries of the node conformance run
// (e2e.test, the ginkgo CLI and agnhost of k8s.io/kubernetes at -version)
// into $HOME/.cache/speclet/e2e/<version>/ and prints that directory.
//
// Usage: go run ./test/nodeconformance/cmd/buildnodeconf [-version v1.34.4]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/speclet/speclet/test/nodeconformance"
)

func main() {
	version := flag.String("version", nodeconformance.DefaultVersion, "k8s.io/kubernetes version (v1.MINOR.PATCH)")
	flag.Parse()
	start := time.Now()
	cached := nodeconformance.BinariesCached(*version)
	b, err := nodeconformance.BuildBinaries(context.Background(), *version, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildnodeconf:", err)
		os.Exit(1)
	}
	if !cached {
		fmt.Fprintf(os.Stderr, "buildnodeconf: built %s in %s\n", filepath.Dir(b.E2E), time.Since(start).Round(time.Second))
	}
	fmt.Println(filepath.Dir(b.E2E))
}
