package engine

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/fsm"
)

// Config.Steps is told of every step a pod's machines take, in the order
// the pod's history records them (machine, container, from, event, to,
// choice branches), with the row of its kind's table that names the
// step's from state and event, and the pod it belongs to.
func TestStepsTellEveryTransition(t *testing.T) { synctest.Test(t, testStepsTellEveryTransition) }

func testStepsTellEveryTransition(t *testing.T) {
	var mu sync.Mutex
	var steps []Step
	h := newHarness(t)
	h.start(Config{Steps: func(s Step) {
		mu.Lock()
		defer mu.Unlock()
		steps = append(steps, s)
	}})
	pod := volumePod("web")
	h.send(config.PodUpdate{Op: config.OpAdd, Source: config.SourceFile, Pods: []*v1.Pod{pod}})
	if !h.running(time.Second, "web") {
		t.Fatalf("pod not Running: %+v", h.podStatus("web"))
	}
	d, ok := h.eng.PodHistory(string(pod.UID))
	if !ok || len(d.History) == 0 {
		t.Fatalf("no history of the pod: %+v", d)
	}
	mu.Lock()
	defer mu.Unlock()
	var told []Step
	for _, s := range steps {
		if s.Pod == pod.UID {
			told = append(told, s)
		}
	}
	if len(told) != len(d.History) {
		t.Fatalf("told %d steps of the pod, its history has %d", len(told), len(d.History))
	}
	for i, s := range told {
		r := d.History[i]
		if s.Machine != r.Machine || s.Container != r.Instance || s.From != r.From || s.Event != r.Event || s.To != r.To || len(s.Choices) != len(r.Choices) {
			t.Errorf("step %d: told %+v, history %+v", i, s, r)
		}
		if from, event := rowOf(s.Machine, s.Row); from != s.From || event != s.Event {
			t.Errorf("step %d: row %d of %s is %s -%s->, the step %s -%s->", i, s.Row, s.Machine, from, event, s.From, s.Event)
		}
	}
}

// rowOf names the from state and the event of row of machine's kind.
func rowOf(machine string, row int) (from, event string) {
	switch machine {
	case fsm.PodKind.Name:
		return kindRow(fsm.PodKind, row)
	case fsm.SandboxKind.Name:
		return kindRow(fsm.SandboxKind, row)
	case fsm.ContainerKind.Name:
		return kindRow(fsm.ContainerKind, row)
	case fsm.ProbeKind.Name:
		return kindRow(fsm.ProbeKind, row)
	}
	return "", ""
}

func kindRow[S, E, A, G fsm.Enum](k fsm.Kind[S, E, A, G], row int) (from, event string) {
	if row < 0 || row >= len(k.Transitions) {
		return "", ""
	}
	return k.Transitions[row].From.String(), k.Transitions[row].Event.String()
}
