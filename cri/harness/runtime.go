package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// Runtime names the container runtime a harness instance runs.
type Runtime string

const (
	// Containerd16 is Debian bookworm's containerd 1.6.20 with Debian's runc
	// 1.1.5 (config version 2).
	Containerd16 Runtime = "containerd-1.6"
	// Containerd2 is containerd ContainerdVersion with runc RuncVersion,
	// both built from their Go modules (BuildRuntime; config version 3).
	Containerd2 Runtime = "containerd-2"
)

// Runtimes are the runtimes the harness can run, the default first.
var Runtimes = []Runtime{Containerd16, Containerd2}

// RuntimeEnv names the environment variable that chooses the runtime of
// every instance whose Options leave Runtime empty: "containerd-1.6"
// (unset or empty: the default) or "containerd-2". `make test` runs the CRI
// contract and engine/containerdtest once more with it set to
// containerd-2; `make run RUNTIME=...` and `make cluster RUNTIME=...` set
// it.
const RuntimeEnv = "SPECLET_RUNTIME"

// ParseRuntime checks a runtime's name; "" is Containerd16.
func ParseRuntime(s string) (Runtime, error) {
	if s == "" {
		return Containerd16, nil
	}
	for _, r := range Runtimes {
		if Runtime(s) == r {
			return r, nil
		}
	}
	names := make([]string, len(Runtimes))
	for i, r := range Runtimes {
		names[i] = string(r)
	}
	return "", fmt.Errorf("unknown runtime %q: want one of %s", s, strings.Join(names, ", "))
}

// EnvRuntime is the runtime $SPECLET_RUNTIME names (Containerd16 when it is
// unset), or an error naming the variable.
func EnvRuntime() (Runtime, error) {
	r, err := ParseRuntime(os.Getenv(RuntimeEnv))
	if err != nil {
		return "", fmt.Errorf("$%s: %w", RuntimeEnv, err)
	}
	return r, nil
}

// binaries are the programs one instance runs.
type binaries struct {
	containerd string
	shim       string // "": found by containerd (Debian's, on PATH)
	runc       string // "": the shim's default (Debian's runc, on PATH)
}

// binariesOf returns the programs of r, building Containerd2's when they
// are not built yet (minutes; a stat once cached).
func binariesOf(ctx context.Context, r Runtime, log io.Writer) (binaries, error) {
	switch r {
	case Containerd16:
		return binaries{containerd: ContainerdBinary}, nil
	case Containerd2:
		b, err := BuildRuntime(ctx, log)
		if err != nil {
			return binaries{}, err
		}
		return binaries{containerd: b.Containerd, shim: b.Shim, runc: b.Runc}, nil
	}
	return binaries{}, fmt.Errorf("unknown runtime %q", r)
}
