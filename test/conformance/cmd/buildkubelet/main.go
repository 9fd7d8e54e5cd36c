// Command buildkubelet builds the upstream kubelet that test/conformance uses
// as its oracle, and caches the binary outside the repository, keyed by
// version:
//
//	$HOME/.cache/speclet/kubelet/<version>/kubelet
//
// It is idempotent: when the cached binary exists it prints its path and
// does nothing else. Otherwise it writes a throwaway Go module under
// $HOME/.cache/speclet/kubelet-build-<version> (never inside the repo) that
// requires k8s.io/kubernetes at <version> and replaces every k8s.io staging
// module that k8s.io/kubernetes' own go.mod points at ./staging/src/... with
// the published staging module at the matching v0.<minor>.<patch>, then runs
// `go build k8s.io/kubernetes/cmd/kubelet`.
//
// Usage: go run ./test/conformance/cmd/buildkubelet [-version v1.34.4] [-print]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/speclet/speclet/test/kubebuild"
)

// DefaultVersion is the kubelet release used as the oracle.
const DefaultVersion = "v1.34.4"

func main() {
	version := flag.String("version", DefaultVersion, "k8s.io/kubernetes version (v1.MINOR.PATCH)")
	printOnly := flag.Bool("print", false, "print the cached binary path and exit (exit 1 if missing)")
	flag.Parse()
	o := kubebuild.Options{Set: "kubelet", Version: *version, Commands: []string{"kubelet"}, Log: os.Stderr}
	dir, err := kubebuild.Dir(o.Set, o.Version)
	if err != nil {
		fatal(err)
	}
	out := filepath.Join(dir, "kubelet")
	if kubebuild.Cached(o) {
		fmt.Println(out)
		return
	}
	if *printOnly {
		fmt.Fprintf(os.Stderr, "buildkubelet: %s is not built\n", out)
		os.Exit(1)
	}
	start := time.Now()
	if _, err := kubebuild.Build(context.Background(), o); err != nil {
		fatal(err)
	}
	fmt.Fprintf(os.Stderr, "buildkubelet: built %s in %s\n", out, time.Since(start).Round(time.Second))
	fmt.Println(out)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "buildkubelet:", err)
	os.Exit(1)
}
