// Command buildkube builds the control-plane binaries the cluster harness
// runs (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl)
// from the Go module k8s.io/kubernetes and caches them in
// $HOME/.cache/speclet/kube/<version>/ (test/kubebuild). It prints that
// directory; when everything is cached it does nothing else. With
// -metrics-server it builds metrics-server (cluster.MetricsServerVersion)
// from its Go module instead, into
// $HOME/.cache/speclet/metrics-server/<version>/, and prints the binary's
// path.
//
// Usage: go run ./test/cluster/cmd/buildkube [-version v1.34.4] [-metrics-server] [-print]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/speclet/speclet/test/cluster"
	"github.com/speclet/speclet/test/kubebuild"
)

func main() {
	version := flag.String("version", cluster.DefaultVersion, "k8s.io/kubernetes version (v1.MINOR.PATCH)")
	printOnly := flag.Bool("print", false, "print the cached directory and exit (exit 1 if a binary is missing)")
	metricsServer := flag.Bool("metrics-server", false, "build metrics-server "+cluster.MetricsServerVersion+" (not the control plane) and print its path")
	flag.Parse()
	if *metricsServer {
		os.Exit(buildMetricsServer(*printOnly))
	}
	if *printOnly {
		dir, err := kubebuild.Dir("kube", *version)
		if err != nil || !cluster.BinariesCached(*version) {
			fmt.Fprintf(os.Stderr, "buildkube: %s binaries are not built\n", *version)
			os.Exit(1)
		}
		fmt.Println(dir)
		return
	}
	start := time.Now()
	cached := cluster.BinariesCached(*version)
	dir, err := cluster.Binaries(context.Background(), *version, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildkube:", err)
		os.Exit(1)
	}
	if !cached {
		fmt.Fprintf(os.Stderr, "buildkube: built %s in %s\n", dir, time.Since(start).Round(time.Second))
	}
	fmt.Println(dir)
}

func buildMetricsServer(printOnly bool) int {
	cached := cluster.MetricsServerCached()
	if printOnly && !cached {
		fmt.Fprintf(os.Stderr, "buildkube: metrics-server %s is not built\n", cluster.MetricsServerVersion)
		return 1
	}
	start := time.Now()
	bin, err := cluster.MetricsServerBinary(context.Background(), os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildkube:", err)
		return 1
	}
	if !cached {
		fmt.Fprintf(os.Stderr, "buildkube: built %s in %s\n", bin, time.Since(start).Round(time.Second))
	}
	fmt.Println(bin)
	return 0
}
