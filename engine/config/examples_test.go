package config

import (
	"os"
	"path/filepath"
	"testing"
)

// TestExamplePodsAreValid keeps examples/pods (what `make run` starts) valid.
func TestExamplePodsAreValid(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "pods")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sc := newDirScanner(dir, "node")
	pods, _, problems := sc.scan()
	for _, p := range problems {
		t.Error(p)
	}
	if len(pods) != len(ents) || len(pods) < 3 {
		t.Errorf("%d pods from %d files in %s, want one per file and at least 3", len(pods), len(ents), dir)
	}
}
