package test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/speclet/speclet"

// layer returns the top-level directory a package of ours lives in.
func layer(pkg string) string {
	rest := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i]
	}
	return rest
}

// allowed says which of our layers each layer may import (itself always).
// Dependencies point one way: cmd -> engine -> {fsm, cri}; gen -> spec;
// verify -> spec; fsm, cri and spec import nothing of ours. test may import
// anything. The engine may import layer spec for spec/podphase only (the
// package table of docs/architecture.md, checked by deps_test.go, says so):
// the pod phase users see is one function the engine's status and the
// model of `speclet spec verify` both evaluate.
var allowed = map[string][]string{
	"spec":   {},
	"gen":    {"spec"},
	"verify": {"spec"},
	"fsm":    {},
	"cri":    {},
	"engine": {"fsm", "cri", "spec"},
	"cmd":    {"spec", "gen", "verify", "fsm", "cri", "engine"},
	"docs":   {},
}

type goPkg struct {
	ImportPath string
	Imports    []string
}

func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	n := 0
	for dec.More() {
		var p goPkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		n++
		from := layer(p.ImportPath)
		if from == "test" {
			continue
		}
		ok, known := allowed[from]
		if !known {
			t.Errorf("package %s lives in %q, which is no layer of the design; add it to the layering test", p.ImportPath, from)
			continue
		}
		for _, imp := range p.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := layer(imp)
			if to == from || contains(ok, to) {
				continue
			}
			t.Errorf("%s imports %s: layer %q may not import layer %q", p.ImportPath, imp, from, to)
		}
	}
	if n == 0 {
		t.Fatal("go list found no packages")
	}
}

func TestLayerOf(t *testing.T) {
	for pkg, want := range map[string]string{
		module + "/engine":        "engine",
		module + "/engine/config": "engine",
		module + "/cmd/speclet":   "cmd",
		module + "/cri":           "cri",
		module + "/cri/harness":   "cri",
	} {
		if got := layer(pkg); got != want {
			t.Errorf("layer(%q) = %q, want %q", pkg, got, want)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}
