package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// The pinned versions of the runtime Containerd2 runs, built from their Go
// modules: the newest releases that build and pass the CRI contract and the
// engine's containerd tests here.
const (
	ContainerdVersion = "v2.4.2"
	RuncVersion       = "v1.5.3"
)

// Built is where the binaries of Containerd2 are once BuildRuntime ran.
type Built struct {
	// Containerd and Shim (containerd-shim-runc-v2) are in
	// $HOME/.cache/speclet/containerd/<ContainerdVersion>/.
	Containerd, Shim string
	// Runc is $HOME/.cache/speclet/runc/<RuncVersion>/runc.
	Runc string
}

// goModule is one Go module whose main packages a build compiles.
type goModule struct {
	set     string // cache directory name: <cache>/<set>/<version>/
	path    string // module path
	version string
	bins    []goBinary
}

// goBinary is one main package of a module and how it is compiled.
type goBinary struct {
	name    string // file name in the cache directory
	pkg     string // import path
	cgo     bool
	tags    string
	ldflags string
}

func containerdModule() goModule {
	const mod = "github.com/containerd/containerd/v2"
	// The release build's version stamp (containerd's Makefile), so that
	// the CRI Version call reports the version; no btrfs, devmapper or zfs
	// snapshotter (no cgo), as with the harness's 1.6, which disables them.
	ld := "-s -w -X " + mod + "/version.Version=" + ContainerdVersion + " -X " + mod + "/version.Package=" + mod
	tags := "urfave_cli_no_docs no_btrfs no_devmapper no_zfs"
	return goModule{set: "containerd", path: mod, version: ContainerdVersion, bins: []goBinary{
		{name: "containerd", pkg: mod + "/cmd/containerd", tags: tags, ldflags: ld},
		// The shim without gRPC, as containerd's Makefile builds it.
		{name: "containerd-shim-runc-v2", pkg: mod + "/cmd/containerd-shim-runc-v2", tags: tags + " no_grpc", ldflags: ld},
	}}
}

func runcModule() goModule {
	const mod = "github.com/opencontainers/runc"
	// runc's Makefile tags but libpathrs (a Rust library Debian bookworm
	// lacks): seccomp needs cgo and libseccomp-dev.
	return goModule{set: "runc", path: mod, version: RuncVersion, bins: []goBinary{
		{name: "runc", pkg: mod, cgo: true, tags: "seccomp urfave_cli_no_docs", ldflags: "-s -w -X main.gitCommit=" + RuncVersion},
	}}
}

// BuiltPaths returns where BuildRuntime puts the binaries, built or not.
func BuiltPaths() (Built, error) {
	cd, err := containerdModule().dir()
	if err != nil {
		return Built{}, err
	}
	rc, err := runcModule().dir()
	if err != nil {
		return Built{}, err
	}
	return Built{Containerd: filepath.Join(cd, "containerd"), Shim: filepath.Join(cd, "containerd-shim-runc-v2"), Runc: filepath.Join(rc, "runc")}, nil
}

// RuntimeBuilt reports whether BuildRuntime would return without building.
func RuntimeBuilt() bool {
	return containerdModule().cached() && runcModule().cached()
}

// BuildRuntime builds containerd ContainerdVersion (the daemon and its runc
// shim) and runc RuncVersion from their Go modules, each in a throwaway
// module $HOME/.cache/speclet/<set>-build-<version> outside the repository,
// into $HOME/.cache/speclet/<set>/<version>/, and returns their paths. It
// is idempotent (a binary that exists is not rebuilt, and appears by rename,
// never partly written), concurrent builds are serialized by a file lock,
// and when everything is built it is a stat. runc needs cgo and
// libseccomp-dev (EnsurePackages installs it). Progress goes to log.
func BuildRuntime(ctx context.Context, log io.Writer) (Built, error) {
	if log == nil {
		log = io.Discard
	}
	for _, m := range []goModule{containerdModule(), runcModule()} {
		if err := m.build(ctx, log); err != nil {
			return Built{}, err
		}
	}
	return BuiltPaths()
}

func (m goModule) root() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("build %s: %w", m.set, err)
	}
	return filepath.Join(home, ".cache", "speclet"), nil
}

func (m goModule) dir() (string, error) {
	root, err := m.root()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, m.set, m.version), nil
}

func (m goModule) cached() bool {
	dir, err := m.dir()
	if err != nil {
		return false
	}
	for _, b := range m.bins {
		if st, err := os.Stat(filepath.Join(dir, b.name)); err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

var goLineRE = regexp.MustCompile(`(?m)^go [0-9.]+$`)

func (m goModule) build(ctx context.Context, log io.Writer) error {
	if m.cached() {
		return nil
	}
	root, err := m.root()
	if err != nil {
		return err
	}
	out, _ := m.dir()
	work := filepath.Join(root, m.set+"-build-"+m.version)
	for _, d := range []string{work, out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("build %s: %w", m.set, err)
		}
	}
	lock, err := os.OpenFile(filepath.Join(work, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("build %s: lock: %w", m.set, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("build %s: lock: %w", m.set, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if m.cached() { // built by another process while we waited
		return nil
	}
	env := []string{"GOFLAGS=-mod=mod", "GOWORK=off"}
	run := func(extra []string, args ...string) ([]byte, error) {
		fmt.Fprintf(log, "harness: (in %s) go %s\n", work, strings.Join(args, " "))
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = work
		cmd.Env = append(append(os.Environ(), env...), extra...)
		cmd.Stderr = log
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("build %s %s: go %s: %w", m.set, m.version, strings.Join(args, " "), err)
		}
		return b, nil
	}
	if err := m.writeModule(work, run); err != nil {
		return err
	}
	for _, b := range m.bins {
		bin := filepath.Join(out, b.name)
		if st, err := os.Stat(bin); err == nil && st.Mode()&0o111 != 0 {
			continue
		}
		start := time.Now()
		cgo := "CGO_ENABLED=0"
		if b.cgo {
			cgo = "CGO_ENABLED=1"
		}
		if _, err := run([]string{cgo}, "build", "-trimpath", "-tags", b.tags, "-ldflags", b.ldflags, "-o", bin+".tmp", b.pkg); err != nil {
			return err
		}
		if err := os.Rename(bin+".tmp", bin); err != nil {
			return fmt.Errorf("build %s: %w", b.name, err)
		}
		fmt.Fprintf(log, "harness: built %s in %s\n", bin, time.Since(start).Round(time.Second))
	}
	return nil
}

// writeModule writes the throwaway module requiring m at its version (with
// the module's own go line) and importing its main packages, and resolves
// it; a module already written for the same packages is kept (its go.sum
// is warm).
func (m goModule) writeModule(work string, run func([]string, ...string) ([]byte, error)) error {
	var tools strings.Builder
	tools.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	for _, b := range m.bins {
		fmt.Fprintf(&tools, "\t_ %q\n", b.pkg)
	}
	tools.WriteString(")\n")
	if old, err := os.ReadFile(filepath.Join(work, "tools.go")); err == nil && string(old) == tools.String() {
		if _, err := os.Stat(filepath.Join(work, "go.sum")); err == nil {
			return nil
		}
	}
	js, err := run(nil, "mod", "download", "-json", m.path+"@"+m.version)
	if err != nil {
		return err
	}
	var info struct{ GoMod, Error string }
	if err := json.Unmarshal(js, &info); err != nil {
		return fmt.Errorf("build %s: go mod download output: %w", m.set, err)
	}
	if info.Error != "" {
		return fmt.Errorf("build %s: %s@%s: %s", m.set, m.path, m.version, info.Error)
	}
	gomod, err := os.ReadFile(info.GoMod)
	if err != nil {
		return fmt.Errorf("build %s: %w", m.set, err)
	}
	goLine := goLineRE.FindString(string(gomod))
	if goLine == "" {
		goLine = "go 1.24.0"
	}
	mod := fmt.Sprintf("// Generated by speclet cri/harness; throwaway.\nmodule speclet.local/%sbuild\n\n%s\n\nrequire %s %s\n", path.Base(m.set), goLine, m.path, m.version)
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(mod), 0o644); err != nil {
		return fmt.Errorf("build %s: %w", m.set, err)
	}
	if err := os.WriteFile(filepath.Join(work, "tools.go"), []byte(tools.String()), 0o644); err != nil {
		return fmt.Errorf("build %s: %w", m.set, err)
	}
	os.Remove(filepath.Join(work, "go.sum"))
	_, err = run(nil, "mod", "tidy", "-e")
	return err
}
