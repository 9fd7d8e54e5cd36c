package history

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/speclet/speclet/fsm"
)

// row is the index of the first row of k's transition table from from on ev.
func row[S, E, A, G fsm.Enum](t *testing.T, k *fsm.Kind[S, E, A, G], from S, ev E) int {
	t.Helper()
	for i, r := range k.Transitions {
		if r.From == from && r.Event == ev && !r.HasGuard {
			return i
		}
	}
	t.Fatalf("%s machine: no unguarded row from %s on %s", k.Name, from, ev)
	return -1
}

// goldenLog fills a log of 6 with 9 steps of every kind: times in UTC, in
// another zone and the zero time; no choice, one and two; actions that the
// tables give and ran without error, one that failed, actions not the
// tables', actions not attached yet; the first three are dropped.
func goldenLog(t *testing.T) *Log {
	h := &Log{Max: 6}
	h.SetMachines([]MachineState{{Machine: "pod", State: "pending"}})
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 123456789, time.UTC)
	pod, ctr, sb, probe := KindNames(&fsm.PodKind), KindNames(&fsm.ContainerKind), KindNames(&fsm.SandboxKind), KindNames(&fsm.ProbeKind)
	sync := row(t, &fsm.PodKind, fsm.PodStateSynced, fsm.PodEventSync)
	exit := row(t, &fsm.ContainerKind, fsm.ContainerStateExited, fsm.ContainerEventExitRecorded)
	created := row(t, &fsm.ContainerKind, fsm.ContainerStateCreating, fsm.ContainerEventCreated)
	startupOk := row(t, &fsm.ProbeKind, fsm.ProbeStateStartingUp, fsm.ProbeEventStartupOk)
	ready := row(t, &fsm.SandboxKind, fsm.SandboxStateCreating, fsm.SandboxEventReady)
	for i := 0; i < 3; i++ { // dropped
		add(h, t0.Add(time.Duration(i)*time.Millisecond), pod, "", sync, nil, "syncing", t0)
	}
	r := add(h, t0.Add(time.Second), pod, "", sync, nil, "syncing", t0.Add(time.Second))
	set(h, r, []ActionResult{{Action: "sync_pod"}})
	r = add(h, t0.Add(2*time.Second), ctr, "app", exit, []int{2, 5}, "crashloop_backoff", t0.Add(2*time.Second))
	set(h, r, []ActionResult{{Action: "count_restart"}, {Action: "remove_container"}})
	r = add(h, t0.Add(3*time.Second), ctr, "side", exit, []int{0}, "terminated", t0)
	set(h, r, []ActionResult{{Action: "remove_container", Error: "boom"}})
	r = add(h, time.Date(2026, 11, 27, 11, 0, 4, 5, time.FixedZone("X", 3600)), ctr, "side", created, nil, "starting", t0)
	set(h, r, []ActionResult{{Action: "start_container"}, {Action: "start_container"}})
	r = add(h, time.Time{}, probe, "app", startupOk, nil, "unready", time.Time{})
	set(h, r, []ActionResult{{Action: "trigger_readiness"}, {Action: "start_probes"}})
	add(h, t0.Add(-time.Hour), sb, "", ready, nil, "ready", t0)
	return h
}

// TestLogJSON: /debug/pods shows a log's machines and history as it always
// did.
func TestLogJSON(t *testing.T) {
	ms, trs := goldenLog(t).Snapshot(true)
	b, err := json.Marshal(PodDebug{UID: "u", Machines: ms, History: trs})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != goldenJSON {
		t.Errorf("JSON\n%s\nwant\n%s", b, goldenJSON)
	}
}

func add(h *Log, at time.Time, n Names, inst string, row int, ch []int, state string, since time.Time) Ref {
	return h.Add(at, n, inst, row, ch, state, since)
}

func set(h *Log, r Ref, rs []ActionResult) { h.SetActions(r, rs) }

const goldenJSON = `{"uid":"u","namespace":"","name":"","phase":"","machines":[{"machine":"pod","state":"syncing","since":"2026-11-27T10:00:01.123456789Z"},{"machine":"container","instance":"app","state":"crashloop_backoff","since":"2026-11-27T10:00:02.123456789Z"},{"machine":"container","instance":"side","state":"starting","since":"2026-11-27T10:00:00.123456789Z"},{"machine":"probe","instance":"app","state":"unready","since":"0001-01-01T00:00:00Z"},{"machine":"sandbox","state":"ready","since":"2026-11-27T10:00:00.123456789Z"}],"history":[{"time":"2026-11-27T10:00:01.123456789Z","machine":"pod","from":"synced","event":"sync","to":"syncing","actions":[{"action":"sync_pod"}]},{"time":"2026-11-27T10:00:02.123456789Z","machine":"container","instance":"app","from":"exited","event":"exit_recorded","to":"crashloop_backoff","choices":["[restart_allowed] -\u003e restarting","[otherwise] -\u003e crashloop_backoff"],"actions":[{"action":"count_restart"},{"action":"remove_container"}]},{"time":"2026-11-27T10:00:03.123456789Z","machine":"container","instance":"side","from":"exited","event":"exit_recorded","to":"terminated","choices":["[pod_terminating] -\u003e terminated"],"actions":[{"action":"remove_container","error":"boom"}]},{"time":"2026-11-27T11:00:04.000000005+01:00","machine":"container","instance":"side","from":"creating","event":"created","to":"starting","actions":[{"action":"start_container"},{"action":"start_container"}]},{"time":"0001-01-01T00:00:00Z","machine":"probe","instance":"app","from":"starting_up","event":"startup_ok","to":"unready","actions":[{"action":"trigger_readiness"},{"action":"start_probes"}]},{"time":"2026-11-27T09:00:00.123456789Z","machine":"sandbox","from":"creating","event":"ready","to":"ready"}]}`
