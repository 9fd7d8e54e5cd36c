// Command buildruntime builds the binaries of the harness's containerd-2
// runtime, containerd (with its runc shim) and runc at the versions
// cri/harness pins, from their Go modules, and caches them in
// $HOME/.cache/speclet/containerd/<version>/ and
// $HOME/.cache/speclet/runc/<version>/ (harness.BuildRuntime). It prints
// the three paths and the versions; when everything is cached it does
// nothing else. Before a build, as root, it installs the harness's Debian
// packages (harness.EnsurePackages: libseccomp-dev and gcc for runc).
//
// Usage: go run ./cri/harness/cmd/buildruntime [-print]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/speclet/speclet/cri/harness"
)

func main() {
	printOnly := flag.Bool("print", false, "print the paths and exit (exit 1 if a binary is missing)")
	flag.Parse()
	if *printOnly {
		b, err := harness.BuiltPaths()
		if err != nil || !harness.RuntimeBuilt() {
			fmt.Fprintf(os.Stderr, "buildruntime: containerd %s and runc %s are not built\n", harness.ContainerdVersion, harness.RuncVersion)
			os.Exit(1)
		}
		show(b)
		return
	}
	start := time.Now()
	cached := harness.RuntimeBuilt()
	if !cached && os.Geteuid() == 0 {
		// runc's cgo build needs libseccomp-dev and gcc.
		if err := harness.EnsurePackages(context.Background(), os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "buildruntime:", err)
			os.Exit(1)
		}
	}
	b, err := harness.BuildRuntime(context.Background(), os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildruntime:", err)
		os.Exit(1)
	}
	if !cached {
		fmt.Fprintf(os.Stderr, "buildruntime: built containerd %s and runc %s in %s\n", harness.ContainerdVersion, harness.RuncVersion, time.Since(start).Round(time.Second))
	}
	show(b)
}

func show(b harness.Built) {
	fmt.Printf("containerd %s %s\nshim %s %s\nrunc %s %s\n", harness.ContainerdVersion, b.Containerd, harness.ContainerdVersion, b.Shim, harness.RuncVersion, b.Runc)
}
