// Package logbuf is where tests keep what a logger wrote, to read it while
// the code under test may still write.
package logbuf

import (
	"strings"
	"sync"
)

// Buffer is a strings.Builder that goroutines may write to and read from
// at once. The zero value is empty and ready.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (w *Buffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// String is what was written so far.
func (w *Buffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
