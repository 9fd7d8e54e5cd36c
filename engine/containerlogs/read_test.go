package containerlogs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// criLine formats one CRI log line written at t0+sec.
func criLine(sec int, stream, tag, content string) string {
	return t0.Add(time.Duration(sec)*time.Second).Format(time.RFC3339Nano) + " " + stream + " " + tag + " " + content + "\n"
}

func writeLog(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ptr(n int64) *int64 { return &n }

// TestStreamLog reads a container log made of a rotated file and the current
// one, with each query parameter.
func TestStreamLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	writeLog(t, path+".20261123-100000", criLine(0, "stdout", "F", "one"), criLine(1, "stderr", "F", "two"))
	writeLog(t, path+".20261123-100000.gz", "not read: compressed\n")
	writeLog(t, path, criLine(2, "stdout", "P", "thr"), criLine(2, "stdout", "F", "ee"), "garbage line\n", criLine(3, "stdout", "F", "four"))
	for _, tc := range []struct {
		name string
		o    ReadOptions
		want string
	}{
		{"all, across the rotated file, partial lines joined", ReadOptions{}, "one\ntwo\nthree\nfour\n"},
		{"tailLines=2", ReadOptions{TailLines: ptr(2)}, "three\nfour\n"},
		{"tailLines=0", ReadOptions{TailLines: ptr(0)}, ""},
		{"tailLines more than there are", ReadOptions{TailLines: ptr(10)}, "one\ntwo\nthree\nfour\n"},
		{"limitBytes=6", ReadOptions{LimitBytes: ptr(6)}, "one\ntw"},
		{"since t0+2s", ReadOptions{Since: t0.Add(2 * time.Second)}, "three\nfour\n"},
		{"timestamps", ReadOptions{TailLines: ptr(1), Timestamps: true}, t0.Add(3*time.Second).Format(time.RFC3339Nano) + " four\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Stream(context.Background(), path, tc.o, &buf, nil, nil); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tc.want {
				t.Errorf("got %q, want %q", buf.String(), tc.want)
			}
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	ch chan string
}

func (s *syncBuffer) Write(p []byte) (int, error) { s.ch <- string(p); return len(p), nil }

// TestStreamLogFollow follows a log while lines are appended and the file is
// rotated, and ends once the container stopped.
func TestStreamLogFollow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	writeLog(t, path, criLine(0, "stdout", "F", "a"))
	out := &syncBuffer{ch: make(chan string, 100)}
	stopped := make(chan struct{})
	running := func(context.Context) bool {
		select {
		case <-stopped:
			return false
		default:
			return true
		}
	}
	done := make(chan error, 1)
	go func() { done <- Stream(context.Background(), path, ReadOptions{Follow: true}, out, nil, running) }()
	expect := func(want string) {
		t.Helper()
		if got := <-out.ch; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	expect("a\n")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(criLine(1, "stdout", "F", "b"))
	f.Close()
	expect("b\n")
	// two more lines in the old file, then the rotation: the runtime
	// reopens a new file at path. Whenever the follower notices, it gives
	// the old file's last lines first, each once, then the new file's.
	f, err = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(criLine(1, "stdout", "F", "b2") + criLine(1, "stdout", "F", "b3"))
	f.Close()
	if err := os.Rename(path, path+".20261123-100001"); err != nil {
		t.Fatal(err)
	}
	writeLog(t, path, criLine(2, "stdout", "F", "c"))
	expect("b2\n")
	expect("b3\n")
	expect("c\n")
	close(stopped)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
