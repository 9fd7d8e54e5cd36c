package engine

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/fsm"
)

// TestForgottenHistories: /debug/pods keeps the history of the latest
// historyPods pods gone, each for historyKeep; a UID forgotten again keeps
// its newest history, once.
func TestForgottenHistories(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	e, err := New(Config{Runtime: nopRuntime{}, RootDir: t.TempDir(), Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	forget := func(name string) {
		t.Helper()
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}}
		d := PodDebug{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name, Phase: string(v1.PodSucceeded),
			Machines: []MachineState{{Machine: fsm.PodMachineName, State: "finished", Since: clk.Now()}}}
		final := &v1.Pod{ObjectMeta: pod.ObjectMeta, Status: v1.PodStatus{Phase: v1.PodSucceeded}}
		e.mu.Lock()
		e.keepGoneLocked(d, final)
		e.mu.Unlock()
	}
	gone := func() []string {
		var names []string
		for _, d := range e.Debug() {
			if !d.Gone {
				t.Errorf("pod %s is listed as running", d.Name)
			}
			names = append(names, d.Name)
		}
		slices.Sort(names)
		return names
	}
	names := func(from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("p%04d", i))
		}
		return out
	}

	for i := range historyPods + 50 {
		forget(fmt.Sprintf("p%04d", i))
	}
	if got, want := gone(), names(50, historyPods+50); !slices.Equal(got, want) {
		t.Fatalf("after %d pods gone, the histories of %d pods (%v ... ), want the latest %d", historyPods+50, len(got), got[:3], len(want))
	}

	clk.Step(historyKeep - time.Minute)
	forget("p0100") // declared again and gone again: one history, the newest
	forget("late")  // the oldest, p0050, makes room
	if got, want := len(gone()), historyPods; got != want {
		t.Errorf("after a UID was forgotten twice, %d histories, want %d", got, want)
	}
	if _, ok := e.PodHistory("uid-p0050"); ok {
		t.Errorf("p0050's history is kept past the %d latest", historyPods)
	}
	if d, ok := e.PodHistory("uid-p0100"); !ok || !d.Gone || !d.Machines[0].Since.Equal(clk.Now()) {
		t.Errorf("p0100's history: %+v (found %v), want the one of its second purge", d.Machines, ok)
	}

	clk.Step(2 * time.Minute) // all but p0100's second purge and late are older than historyKeep
	forget("last")
	if got, want := gone(), []string{"last", "late", "p0100"}; !slices.Equal(got, want) {
		t.Errorf("%s after the first ones expired: histories of %v, want %v", historyKeep, got, want)
	}
}

// BenchmarkForgetHistory measures forgetting one purged pod's history
// with historyPods already kept, as housekeeping does for each pod of a
// removal of thousands under the engine's lock.
func BenchmarkForgetHistory(b *testing.B) {
	e, err := New(Config{Runtime: nopRuntime{}, RootDir: b.TempDir(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	ds := make([]PodDebug, 1024)
	for i := range ds {
		ds[i] = PodDebug{UID: types.UID(fmt.Sprintf("uid-%04d", i)), Namespace: "default", Name: fmt.Sprintf("p%04d", i),
			Machines: []MachineState{{Machine: fsm.PodMachineName, State: "finished"}}}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range ds[:historyPods] {
		e.keepGoneLocked(d, nil)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e.keepGoneLocked(ds[i%len(ds)], nil)
	}
}
