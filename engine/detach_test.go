package engine

import (
	"context"
	"testing"
	"time"

	"github.com/speclet/speclet/cri"
)

// blockingStart is a runtime whose StartContainer waits until released and
// reports whether its context ended meanwhile.
type blockingStart struct {
	cri.Runtime
	entered  chan struct{}
	release  chan struct{}
	canceled chan bool
}

func (b *blockingStart) StartContainer(ctx context.Context, id string) error {
	close(b.entered)
	select {
	case <-b.release:
		b.canceled <- false
	case <-ctx.Done():
		b.canceled <- true
	}
	return nil
}

// A kill cancels the pod's running actions, but a StartContainer already
// sent runs to its end (containerd would start the task anyway); stopping
// the engine still ends it.
func TestKillDoesNotCancelStartContainer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		stopEngine bool
		want       bool // the call's context ended
	}{{"kill", false, false}, {"engine stops", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			b := &blockingStart{entered: make(chan struct{}), release: make(chan struct{}), canceled: make(chan bool, 1)}
			run, stopRun := context.WithCancel(context.Background())
			defer stopRun()
			rt := detachedRuntime{Runtime: b, run: func() context.Context { return run }}
			action, kill := context.WithCancel(run)
			go rt.StartContainer(action, "c1")
			<-b.entered
			kill()
			if tc.stopEngine {
				stopRun()
			} else {
				// Give a wrongly cancelled call the time to notice; the
				// release below ends a correct one.
				time.Sleep(50 * time.Millisecond)
				close(b.release)
			}
			if got := <-b.canceled; got != tc.want {
				t.Errorf("StartContainer's context ended = %v, want %v", got, tc.want)
			}
		})
	}
}
