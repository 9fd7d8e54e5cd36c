package main

import (
	"os"
	"path/filepath"
	"testing"

	nc "github.com/speclet/speclet/test/nodeconformance"
)

// TestMergeVerdicts: a focused run's verdicts replace those of the same
// specs and keep every other line; a missing file is created.
func TestMergeVerdicts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubelet.txt")
	if n, err := mergeVerdicts(path, []nc.Spec{{Name: "b", Verdict: nc.Fail}}); err != nil || n != 1 {
		t.Fatalf("merge into a missing file: %d, %v", n, err)
	}
	if err := os.WriteFile(path, []byte("PASS a\nFAIL b\nSKIP c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := mergeVerdicts(path, []nc.Spec{{Name: "b", Verdict: nc.Pass}, {Name: "d", Verdict: nc.Fail}}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "PASS a\nPASS b\nSKIP c\nFAIL d\n"; string(b) != want {
		t.Errorf("merged file:\n%s\nwant:\n%s", b, want)
	}
	if err := os.WriteFile(path, []byte("MAYBE a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := mergeVerdicts(path, nil); err == nil {
		t.Error("merge into a malformed file: no error")
	}
}
