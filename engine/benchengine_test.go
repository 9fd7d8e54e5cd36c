package engine

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/speclet/speclet/engine/config"
)

// runBenchEngine starts an engine of cfg (node "node", a new root
// directory, no logs unless cfg has a logger) on its own goroutine; stop
// ends it and waits for Run to return.
func runBenchEngine(b *testing.B, cfg Config) (e *Engine, updates chan config.PodUpdate, stop func()) {
	b.Helper()
	cfg.RootDir, cfg.NodeName = b.TempDir(), "node"
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	updates = make(chan config.PodUpdate, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, updates) }()
	return e, updates, func() { cancel(); <-done }
}

// waitSettled returns once no pod worker of e has had an input waiting in
// five polls 100 ms apart: the start's backlog (runtime events queued
// behind the starts) is handled, and the heap then holds what the running
// pods keep. The heap at all Running also holds that backlog, more or less
// of it with the machine's load.
func waitSettled(e *Engine) {
	for quiet := 0; quiet < 5; {
		time.Sleep(100 * time.Millisecond)
		quiet++
		e.mu.RLock()
		for _, w := range e.workers {
			if w.Queued() > 0 {
				quiet = 0
				break
			}
		}
		e.mu.RUnlock()
	}
}
