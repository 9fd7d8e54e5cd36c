// Command buildsampleplugin builds the sample device plugin of
// k8s.io/kubernetes (test/images/sample-device-plugin) at -version into
// $HOME/.cache/speclet/sample-device-plugin/<version>/ and prints the
// binary's path; a cached binary is not rebuilt.
//
// Usage: go run ./test/deviceplugin/cmd/buildsampleplugin [-version v1.34.4]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/speclet/speclet/test/deviceplugin"
)

func main() {
	version := flag.String("version", deviceplugin.DefaultVersion, "k8s.io/kubernetes version (v1.MINOR.PATCH)")
	flag.Parse()
	start := time.Now()
	cached := deviceplugin.SampleCached(*version)
	bin, err := deviceplugin.BuildSample(context.Background(), *version, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildsampleplugin:", err)
		os.Exit(1)
	}
	if !cached {
		fmt.Fprintf(os.Stderr, "buildsampleplugin: built %s in %s\n", bin, time.Since(start).Round(time.Second))
	}
	fmt.Println(bin)
}
