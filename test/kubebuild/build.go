// Package kubebuild builds commands of the Go module k8s.io/kubernetes
// (kubelet, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl)
// and caches the binaries outside the repository, keyed by version:
//
//	$HOME/.cache/speclet/<set>/<version>/<command>
//
// The build happens in a throwaway Go module under
// $HOME/.cache/speclet/<set>-build-<version> (never inside the repository)
// that requires k8s.io/kubernetes at <version> and replaces every k8s.io
// staging module that k8s.io/kubernetes' own go.mod points at
// ./staging/src/... with the published staging module at the matching
// v0.<minor>.<patch>.
//
// Contracts:
//   - Build is idempotent: a command whose cached binary exists is not
//     rebuilt; the binary appears by rename, so a reader never sees a partial
//     file.
//   - Concurrent Builds of one set (parallel test binaries, several
//     processes) are serialized by a file lock in the build directory.
//
// # Usage
//
//	dir, err := kubebuild.Build(ctx, kubebuild.Options{
//		Set: "kube", Version: "v1.34.4",
//		Commands: []string{"kube-apiserver", "kubectl"}, Log: os.Stderr})
//	// dir/kube-apiserver, dir/kubectl
//
// A cold build of the four control-plane commands takes several minutes on
// two cores; a warm one (module cache filled, binaries cached) is a stat.
//
// BuildModule builds programs of another Go module the same way, as tools
// of a throwaway module at the module's version (metrics-server:
// test/cluster.MetricsServerBinary).
package kubebuild

import (
	"bufio"
	"bytes"
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

// Options select what Build builds.
type Options struct {
	// Set names the cache directory (e.g. "kube", "kubelet").
	Set string
	// Version is the k8s.io/kubernetes version, v1.MINOR.PATCH.
	Version string
	// Commands are the commands under k8s.io/kubernetes/cmd to build.
	Commands []string
	// Programs are other main packages, by full import path (e.g.
	// k8s.io/kubernetes/test/images/agnhost or the ginkgo CLI at the version
	// k8s.io/kubernetes pins); each binary is named after the path's last
	// element.
	Programs []string
	// Tests are packages compiled with `go test -c` (e.g.
	// k8s.io/kubernetes/test/e2e); each binary is named after the path's last
	// element with ".test" appended (e2e.test).
	Tests []string
	// Files are files of the k8s.io/kubernetes module (paths inside it, e.g.
	// test/images/agnhost/porter/localhost.crt) copied next to the
	// binaries under their base name.
	Files []string
	// Log receives progress (nil: discard).
	Log io.Writer
}

// CacheRoot is $HOME/.cache/speclet.
func CacheRoot() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".cache", "speclet"), nil
}

// Dir is the directory holding the cached binaries of set at version.
func Dir(set, version string) (string, error) {
	root, err := CacheRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, set, version), nil
}

// Cached reports whether every command of o is built.
func Cached(o Options) bool {
	dir, err := Dir(o.Set, o.Version)
	if err != nil {
		return false
	}
	for _, t := range o.targets() {
		if !isExec(filepath.Join(dir, t.bin)) {
			return false
		}
	}
	for _, f := range o.Files {
		if _, err := os.Stat(filepath.Join(dir, path.Base(f))); err != nil {
			return false
		}
	}
	return true
}

// target is one binary of a build: its file name, its import path and
// whether it is a test binary.
type target struct {
	bin, pkg string
	test     bool
}

func (o Options) targets() []target {
	var ts []target
	for _, c := range o.Commands {
		ts = append(ts, target{bin: c, pkg: "k8s.io/kubernetes/cmd/" + c})
	}
	for _, p := range o.Programs {
		ts = append(ts, target{bin: path.Base(p), pkg: p})
	}
	for _, p := range o.Tests {
		ts = append(ts, target{bin: path.Base(p) + ".test", pkg: p, test: true})
	}
	return ts
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

var versionRE = regexp.MustCompile(`^v1\.(\d+)\.(\d+)$`)

// Build builds the missing commands of o and returns the directory that
// holds all of them.
func Build(ctx context.Context, o Options) (string, error) {
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	m := versionRE.FindStringSubmatch(o.Version)
	if m == nil {
		return "", fmt.Errorf("build %s: version %q is not v1.MINOR.PATCH", o.Set, o.Version)
	}
	out, err := Dir(o.Set, o.Version)
	if err != nil {
		return "", err
	}
	if Cached(o) {
		return out, nil
	}
	root, _ := CacheRoot()
	dir := filepath.Join(root, o.Set+"-build-"+o.Version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("build %s: lock: %w", o.Set, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("build %s: lock: %w", o.Set, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if Cached(o) { // built by another process while we waited
		return out, nil
	}
	b := builder{ctx: ctx, dir: dir, log: log, env: []string{"GOFLAGS=-mod=mod", "GOWORK=off"}}
	if err := b.module(o, "v0."+m[1]+"."+m[2]); err != nil {
		return "", err
	}
	ld := fmt.Sprintf("-s -w -X k8s.io/component-base/version.gitVersion=%s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=%s -X k8s.io/component-base/version.gitTreeState=clean", o.Version, m[1])
	for _, t := range o.targets() {
		bin := filepath.Join(out, t.bin)
		if isExec(bin) {
			continue
		}
		start := time.Now()
		benv := append(b.env, "CGO_ENABLED=0")
		verb := "build"
		if t.test {
			verb = "test"
		}
		args := []string{verb}
		if t.test {
			args = append(args, "-c")
		}
		args = append(args, "-trimpath", "-tags", "tools", "-ldflags", ld, "-o", bin+".tmp", t.pkg)
		if _, err := b.run(benv, "go", args...); err != nil {
			return "", fmt.Errorf("build %s: %w", t.bin, err)
		}
		if err := os.Rename(bin+".tmp", bin); err != nil {
			return "", err
		}
		fmt.Fprintf(log, "kubebuild: built %s in %s\n", bin, time.Since(start).Round(time.Second))
	}
	if len(o.Files) > 0 {
		modDir, err := b.run(b.env, "go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes")
		if err != nil {
			return "", err
		}
		for _, f := range o.Files {
			data, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(modDir)), filepath.FromSlash(f)))
			if err != nil {
				return "", fmt.Errorf("copy %s of k8s.io/kubernetes: %w", f, err)
			}
			dst := filepath.Join(out, path.Base(f))
			if err := os.WriteFile(dst+".tmp", data, 0o644); err != nil {
				return "", err
			}
			if err := os.Rename(dst+".tmp", dst); err != nil {
				return "", err
			}
		}
	}
	return out, nil
}

type builder struct {
	ctx context.Context
	dir string
	log io.Writer
	env []string
}

func (b builder) run(env []string, name string, args ...string) ([]byte, error) {
	fmt.Fprintf(b.log, "kubebuild: (in %s) %s %s\n", b.dir, name, strings.Join(args, " "))
	cmd := exec.CommandContext(b.ctx, name, args...)
	cmd.Dir = b.dir
	cmd.Env = append(os.Environ(), env...)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = b.log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return stdout.Bytes(), nil
}

// module writes the throwaway module requiring k8s.io/kubernetes with the
// staging replace lines, importing every command of o, and resolves it. An
// existing module that already imports them is kept (its go.sum is warm).
func (b builder) module(o Options, staging string) error {
	var tools strings.Builder
	tools.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	for _, t := range o.targets() {
		fmt.Fprintf(&tools, "\t_ %q\n", t.pkg)
	}
	tools.WriteString(")\n")
	if old, err := os.ReadFile(filepath.Join(b.dir, "tools.go")); err == nil && string(old) == tools.String() {
		if _, err := os.Stat(filepath.Join(b.dir, "go.sum")); err == nil {
			return nil
		}
	}
	js, err := b.run(b.env, "go", "mod", "download", "-json", "k8s.io/kubernetes@"+o.Version)
	if err != nil {
		return err
	}
	var info struct{ GoMod, Error string }
	if err := json.Unmarshal(js, &info); err != nil {
		return fmt.Errorf("go mod download output: %w", err)
	}
	if info.Error != "" {
		return fmt.Errorf("k8s.io/kubernetes@%s: %s", o.Version, info.Error)
	}
	gomod, err := os.ReadFile(info.GoMod)
	if err != nil {
		return err
	}
	mods, goLine := StagingModules(gomod)
	if len(mods) == 0 {
		return fmt.Errorf("no ./staging replace lines in %s", info.GoMod)
	}
	fmt.Fprintf(b.log, "kubebuild: k8s.io/kubernetes %s takes %d modules from staging; replacing them with %s\n", o.Version, len(mods), staging)
	var mb strings.Builder
	fmt.Fprintf(&mb, "// Generated by speclet test/kubebuild; throwaway.\nmodule speclet.local/%sbuild\n\n%s\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", o.Set, goLine, o.Version)
	for _, mod := range mods {
		fmt.Fprintf(&mb, "\t%s => %s %s\n", mod, mod, staging)
	}
	mb.WriteString(")\n")
	if err := os.WriteFile(filepath.Join(b.dir, "go.mod"), []byte(mb.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.dir, "tools.go"), []byte(tools.String()), 0o644); err != nil {
		return err
	}
	os.Remove(filepath.Join(b.dir, "go.sum"))
	_, err = b.run(b.env, "go", "mod", "tidy", "-e")
	return err
}

// StagingModules returns the module paths that gomod replaces with a
// ./staging directory, and its `go` line.
func StagingModules(gomod []byte) ([]string, string) {
	var mods []string
	goLine := "go 1.24.0"
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "go ") {
			goLine = line
		}
		line = strings.TrimPrefix(line, "replace ")
		lhs, rhs, ok := strings.Cut(line, "=>")
		if !ok {
			continue
		}
		rhs = strings.TrimSpace(rhs)
		if !strings.HasPrefix(rhs, "./staging/") {
			continue
		}
		f := strings.Fields(lhs)
		if len(f) == 0 || !strings.HasPrefix(f[0], "k8s.io/") {
			continue
		}
		mods = append(mods, f[0])
	}
	return mods, goLine
}
