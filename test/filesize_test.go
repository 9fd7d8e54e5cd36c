package test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxEngineFileLines is the most lines a Go file below engine/ may have: a
// file that grows past it holds more than one thing and is split by what
// its parts own.
const maxEngineFileLines = 400

// TestEngineFileSize: no Go file below engine/ (tests included) is longer
// than maxEngineFileLines.
func TestEngineFileSize(t *testing.T) {
	long, err := longFiles(filepath.Join("..", "engine"), maxEngineFileLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range long {
		t.Errorf("%s: split it by what its parts own (at most %d lines a file)", l, maxEngineFileLines)
	}
}

// longFiles lists the .go files below root with more than max lines, as
// "path: N lines".
func longFiles(root string, max int) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n := bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			n++
		}
		if n > max {
			out = append(out, fmt.Sprintf("%s: %d lines", strings.TrimPrefix(path, "../"), n))
		}
		return nil
	})
	return out, err
}

// TestLongFiles: the size check counts lines as wc does and names the file.
func TestLongFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lines int) {
		if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte("//\n"), lines), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("short.go", 400)
	write("long.go", 401)
	write("long.txt", 900)
	got, err := longFiles(dir, 400)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.HasSuffix(got[0], "long.go: 401 lines") {
		t.Errorf("long files %q, want only long.go with 401 lines", got)
	}
}
