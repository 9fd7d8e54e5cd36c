package fsm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// guards answers every guard of every machine from a map of spec names, so
// scripts can set them.
type guards map[string]bool

func (g guards) AdmissionRefused() bool     { return g["admission_refused"] }
func (g guards) NameTaken() bool            { return g["name_taken"] }
func (g guards) PodDone() bool              { return g["pod_done"] }
func (g guards) AllContainersStopped() bool { return g["all_containers_stopped"] }
func (g guards) PodTerminating() bool       { return g["pod_terminating"] }
func (g guards) StartBlocked() bool         { return g["start_blocked"] }
func (g guards) RecreateForbidden() bool    { return g["recreate_forbidden"] }
func (g guards) RestartAllowed() bool       { return g["restart_allowed"] }
func (g guards) SpecChanged() bool          { return g["spec_changed"] }
func (g guards) ImageInvalid() bool         { return g["image_invalid"] }
func (g guards) PullAlways() bool           { return g["pull_always"] }
func (g guards) PullNever() bool            { return g["pull_never"] }
func (g guards) FirstProbeKill() bool       { return g["first_probe_kill"] }

// driver fires events by spec name on either machine and renders the steps.
type driver interface {
	fire(ev string) (string, error)
	state() string
	timers() string
}

type podDriver struct{ m *PodMachine }

func (d podDriver) fire(name string) (string, error) {
	ev, ok := ParsePodEvent(name)
	if !ok {
		return "", fmt.Errorf("no pod event %q", name)
	}
	st, err := d.m.Fire(ev)
	if err != nil {
		return "", err
	}
	return render(st.From.String(), st.To.String(), st.Event.String(), names(st.Actions), names(st.Path)), nil
}
func (d podDriver) state() string { return d.m.State().String() }
func (d podDriver) timers() string {
	var out []string
	for _, t := range d.m.Timers() {
		out = append(out, fmt.Sprintf("%s after %s", t.Event, t.After))
	}
	return strings.Join(out, "\n")
}

type containerDriver struct{ m *ContainerMachine }

func (d containerDriver) fire(name string) (string, error) {
	ev, ok := ParseContainerEvent(name)
	if !ok {
		return "", fmt.Errorf("no container event %q", name)
	}
	st, err := d.m.Fire(ev)
	if err != nil {
		return "", err
	}
	return render(st.From.String(), st.To.String(), st.Event.String(), names(st.Actions), names(st.Path)), nil
}
func (d containerDriver) state() string { return d.m.State().String() }
func (d containerDriver) timers() string {
	var out []string
	for _, t := range d.m.Timers() {
		out = append(out, fmt.Sprintf("%s after %s", t.Event, t.After))
	}
	return strings.Join(out, "\n")
}

func names[T fmt.Stringer](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}

func render(from, to, ev string, actions, path []string) string {
	var b strings.Builder
	if len(path) == 0 {
		fmt.Fprintf(&b, "%s: internal on %s", from, ev)
	} else {
		fmt.Fprintf(&b, "%s -> %s on %s", from, to, ev)
		if len(path) > 1 || path[0] != to {
			fmt.Fprintf(&b, " via %s", strings.Join(path, ", "))
		}
	}
	if len(actions) > 0 {
		fmt.Fprintf(&b, " / %s", strings.Join(actions, ", "))
	}
	return b.String()
}

// TestLifecycle runs the scripts in testdata/*.txt. Commands:
//
//	new pod|container [at=STATE]   a fresh machine (guards all false)
//	set NAME[=false] ...           set guards
//	fire EVENT ...                 fire events in order; one line per step
//	timers                         timers armed in the current state
func TestLifecycle(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var d driver
		g := guards{}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "new":
				g = guards{}
				var at string
				if td.HasArg("at") {
					td.ScanArgs(t, "at", &at)
				}
				switch {
				case td.HasArg("pod"):
					s := PodInitialState
					if at != "" {
						var ok bool
						if s, ok = ParsePodState(at); !ok {
							t.Fatalf("%s: no pod state %q", td.Pos, at)
						}
					}
					d = podDriver{NewPodMachineAt(s, g)}
				case td.HasArg("container"):
					s := ContainerInitialState
					if at != "" {
						var ok bool
						if s, ok = ParseContainerState(at); !ok {
							t.Fatalf("%s: no container state %q", td.Pos, at)
						}
					}
					d = containerDriver{NewContainerMachineAt(s, g)}
				default:
					t.Fatalf("%s: new needs pod or container", td.Pos)
				}
				return d.state()
			case "set":
				for _, a := range td.CmdArgs {
					v := true
					if len(a.Vals) > 0 {
						v = a.Vals[0] != "false"
					}
					g[a.Key] = v
				}
				return ""
			case "fire":
				var out []string
				for _, a := range td.CmdArgs {
					s, err := d.fire(a.Key)
					if err != nil {
						out = append(out, "error: "+err.Error())
						continue
					}
					out = append(out, s)
				}
				return strings.Join(out, "\n")
			case "timers":
				return d.timers()
			}
			t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
			return ""
		})
	})
}

func TestFireWithoutTransitionChangesNothing(t *testing.T) {
	m := NewPodMachine(guards{})
	_, err := m.Fire(PodEventCleanupDone)
	if !errors.Is(err, ErrNoTransition) {
		t.Fatalf("Fire(cleanup_done) in pending: err = %v, want ErrNoTransition", err)
	}
	if !strings.Contains(err.Error(), `"cleanup_done"`) || !strings.Contains(err.Error(), `"pending"`) {
		t.Errorf("error %q does not name the event and the state", err)
	}
	if m.State() != PodStatePending || m.Can(PodEventCleanupDone) {
		t.Errorf("after a refused event: state %s, Can = %v; want pending, false", m.State(), m.Can(PodEventCleanupDone))
	}
	if _, err := m.Fire(PodEvent(200)); !errors.Is(err, ErrNoTransition) {
		t.Errorf("Fire(unknown event) = %v, want ErrNoTransition", err)
	}
}

// TestPodNeverGoesBack checks the kubelet rule over the whole table: once a
// worker has seen termination it never reaches a state that starts
// containers again.
func TestPodNeverGoesBack(t *testing.T) {
	rank := map[PodState]int{
		PodStatePending: 0, PodStateWaitingToStart: 1, PodStateSyncing: 2, PodStateSynced: 2, PodStateSyncBackoff: 2,
		PodStateCompleting: 3, PodStateCompleted: 3,
		PodStateTerminating: 4, PodStateTerminated: 5, PodStateFinished: 6,
	}
	if len(rank) != len(PodStates) {
		t.Fatalf("rank covers %d states, the machine has %d: rank the new ones", len(rank), len(PodStates))
	}
	for _, tr := range PodTransitionTable {
		if rank[tr.To] < rank[tr.From] {
			t.Errorf("pod transition %s -> %s on %s goes backwards", tr.From, tr.To, tr.Event)
		}
	}
}

// TestOnlyStartEntersTheStartPath: the start path (checking_image,
// pulling, creating, starting) is entered only by `start` from waiting and
// by the completions along it; the pod machine delivers `start` only from sync_pod, the entry
// action of syncing, which no state after termination reaches
// (TestPodNeverGoesBack), so no container starts once the pod terminates.
// With pod_terminating set, an exit never leads back to waiting.
func TestOnlyStartEntersTheStartPath(t *testing.T) {
	startPath := map[ContainerState][]ContainerState{
		ContainerStateCheckingImage: {ContainerStateWaiting},
		ContainerStatePulling:       {ContainerStateWaiting, ContainerStateCheckingImage},
		ContainerStateCreating:      {ContainerStateCheckingImage, ContainerStatePulling},
		ContainerStateStarting:      {ContainerStateCreating},
	}
	for _, tr := range ContainerTransitionTable {
		from, ok := startPath[tr.To]
		if !ok || tr.Internal {
			continue
		}
		if !slices.Contains(from, tr.From) || tr.From == ContainerStateWaiting && tr.Event != ContainerEventStart {
			t.Errorf("container transition %s -> %s on %s enters the start path", tr.From, tr.To, tr.Event)
		}
	}
	g := guards{"pod_terminating": true, "restart_allowed": true, "spec_changed": true}
	for _, ev := range []ContainerEvent{ContainerEventExitRecorded} {
		st, err := NewContainerMachineAt(ContainerStateExited, g).Fire(ev)
		if err != nil || st.To != ContainerStateTerminated {
			t.Errorf("exit while the pod terminates: %s, %v; want terminated", st.To, err)
		}
	}
	for _, s := range []PodState{PodStateTerminating, PodStateTerminated, PodStateFinished} {
		for _, a := range PodStateEntry[s] {
			if a == PodActionSyncPod {
				t.Errorf("pod state %s runs sync_pod", s)
			}
		}
	}
}

// TestShortestPathsReachEveryState replays each generated shortest path under
// every guard assignment at every step (guards may change between events)
// and checks that the path can end in, or pass through, its state.
func TestShortestPathsReachEveryState(t *testing.T) {
	paths := PodShortestPaths()
	if len(paths) != len(PodStates) {
		t.Errorf("pod: %d shortest paths for %d states", len(paths), len(PodStates))
	}
	for target, evs := range paths {
		if _, passed := replay(PodInitialState, evs, podGuardNames[:], firePod); !passed[target] {
			t.Errorf("pod: path %v does not reach %s", evs, target)
		}
	}
	cpaths := ContainerShortestPaths()
	if len(cpaths) != len(ContainerStates) {
		t.Errorf("container: %d shortest paths for %d states", len(cpaths), len(ContainerStates))
	}
	for target, evs := range cpaths {
		if _, passed := replay(ContainerInitialState, evs, containerGuardNames[:], fireContainer); !passed[target] {
			t.Errorf("container: path %v does not reach %s", evs, target)
		}
	}
	spaths := SandboxShortestPaths()
	if len(spaths) != len(SandboxStates) {
		t.Errorf("sandbox: %d shortest paths for %d states", len(spaths), len(SandboxStates))
	}
	for target, evs := range spaths {
		if _, passed := replay(SandboxInitialState, evs, sandboxGuardNames[:], fireSandbox); !passed[target] {
			t.Errorf("sandbox: path %v does not reach %s", evs, target)
		}
	}
}

func fireSandbox(s SandboxState, g guards, ev SandboxEvent) (SandboxState, []SandboxState, bool) {
	st, err := NewSandboxMachineAt(s, g).Fire(ev)
	return st.To, st.Path, err == nil
}

// replay fires evs from initial under every assignment of the named guards at
// every step. It returns the states the last event can end in, and the states
// the last event can enter (its path, choices included). The initial state
// counts as both when evs is empty.
func replay[S comparable, E any](initial S, evs []E, guardNames []string, fire func(S, guards, E) (S, []S, bool)) (end, passed map[S]bool) {
	end = map[S]bool{initial: true}
	passed = map[S]bool{initial: true}
	for _, ev := range evs {
		next := map[S]bool{}
		passed = map[S]bool{}
		for s := range end {
			for _, g := range assignments(guardNames) {
				if to, path, ok := fire(s, g, ev); ok {
					next[to] = true
					passed[to] = true
					for _, p := range path {
						passed[p] = true
					}
				}
			}
		}
		end = next
	}
	return end, passed
}

func firePod(s PodState, g guards, ev PodEvent) (PodState, []PodState, bool) {
	st, err := NewPodMachineAt(s, g).Fire(ev)
	return st.To, st.Path, err == nil
}

func fireContainer(s ContainerState, g guards, ev ContainerEvent) (ContainerState, []ContainerState, bool) {
	st, err := NewContainerMachineAt(s, g).Fire(ev)
	return st.To, st.Path, err == nil
}

// assignments returns every true/false assignment of the named guards.
func assignments(names []string) []guards {
	var out []guards
	for bits := 0; bits < 1<<len(names); bits++ {
		g := guards{}
		for i, n := range names {
			g[n] = bits&(1<<i) != 0
		}
		out = append(out, g)
	}
	return out
}

func contains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestMetricLabelsAreSpecNames(t *testing.T) {
	states, events := PodMetricLabels()
	if len(states) != len(PodStates) || len(events) != len(PodEvents) {
		t.Fatalf("labels: %d states, %d events; machine has %d, %d", len(states), len(events), len(PodStates), len(PodEvents))
	}
	for i, s := range PodStates {
		if states[i] != s.String() {
			t.Errorf("state label %d = %q, want %q", i, states[i], s)
		}
	}
	states[0] = "changed"
	if again, _ := PodMetricLabels(); again[0] != PodStates[0].String() {
		t.Error("PodMetricLabels returns a shared slice; callers could corrupt the names")
	}
}

func TestRoutes(t *testing.T) {
	for _, tc := range []struct {
		in        Input
		pod       string
		container string
		probe     string
	}{
		{InputConfigAdd, "update", "", ""},
		{InputConfigUpdate, "update", "", ""},
		{InputConfigRestore, "update", "", ""},
		{InputConfigRemove, "kill", "", ""},
		{InputConfigDelete, "kill", "", ""},
		{InputConfigReconcile, "sync", "", ""},
		{InputContainerStarted, "sync", "started", ""},
		{InputContainerDied, "sync", "died", ""},
		{InputContainerRemoved, "", "removed", ""},
		{InputContainerChanged, "sync", "state_unknown", ""},
		{InputSyncTick, "sync", "", ""},
		{InputLivenessFailed, "", "", "liveness_failed"},
		{InputStartupSucceeded, "", "", "startup_ok"},
		{InputStartupFailed, "", "", "startup_failed"},
		{InputReadinessSucceeded, "", "", "ready"},
		{InputReadinessFailed, "", "", "unready"},
	} {
		r := Route(tc.in)
		var pod, ctr, probe string
		if r.HasProbe {
			probe = r.Probe.String()
		}
		if r.HasPod {
			pod = r.Pod.String()
		}
		if r.HasContainer {
			ctr = r.Container.String()
		}
		if pod != tc.pod || ctr != tc.container || probe != tc.probe {
			t.Errorf("Route(%s) = pod %q container %q probe %q, want %q %q %q", tc.in, pod, ctr, probe, tc.pod, tc.container, tc.probe)
		}
		if back, ok := ParseInput(tc.in.String()); !ok || back != tc.in {
			t.Errorf("ParseInput(%q) = %v, %v", tc.in, back, ok)
		}
	}
	if r := Route(Input(250)); r.HasPod || r.HasContainer {
		t.Errorf("Route(unknown) = %+v, want nothing", r)
	}
}

func TestActionsRunByName(t *testing.T) {
	rec := &recorder{}
	for _, a := range []PodAction{PodActionSyncPod, PodActionKillContainers, PodActionRemovePod} {
		if err := RunPodAction(t.Context(), rec, rec.exec, a); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(rec.ran, ","); got != "sync_pod,kill_containers,remove_pod" {
		t.Errorf("ran %s", got)
	}
	if err := RunPodAction(t.Context(), rec, rec.exec, PodAction(99)); err == nil {
		t.Error("RunPodAction(unknown) = nil, want an error")
	}
	if got := PodActionCRI[PodActionRemovePod]; strings.Join(got, ",") != "RemovePodSandbox" {
		t.Errorf("remove_pod CRI calls = %v", got)
	}
}

// recorder implements PodActions: each action's operation is its name,
// which its exec records.
type recorder struct{ ran []string }

func (r *recorder) exec(_ context.Context, name string) error {
	r.ran = append(r.ran, name)
	return nil
}
func (r *recorder) SyncPod() string         { return "sync_pod" }
func (r *recorder) MountVolumes() string    { return "mount_volumes" }
func (r *recorder) EnsurePodCgroup() string { return "ensure_pod_cgroup" }
func (r *recorder) UnmountVolumes() string  { return "unmount_volumes" }
func (r *recorder) KillContainers() string  { return "kill_containers" }
func (r *recorder) StopSandbox() string     { return "stop_sandbox" }
func (r *recorder) RemovePod() string       { return "remove_pod" }
func (r *recorder) ReleaseName() string     { return "release_name" }
func (r *recorder) ReportStatus() string    { return "report_status" }
func (r *recorder) ExceedDeadline() string  { return "exceed_deadline" }

// TestTransitionPathsCoverEveryTransition replays the path generated for each
// pod and container transition (any guard assignment at each step) and checks
// it can end in the transition's target.
func TestTransitionPathsCoverEveryTransition(t *testing.T) {
	for i, evs := range PodTransitionPaths() {
		tr := PodTransitionTable[i]
		if end, _ := replay(PodInitialState, evs, podGuardNames[:], firePod); len(evs) == 0 || !end[tr.To] {
			t.Errorf("pod transition %d (%s -%s-> %s): path %v does not take it", i, tr.From, tr.Event, tr.To, evs)
		}
	}
	// A container transition may lead into a choice state that is left at
	// once (exited), so its target need only be passed.
	for i, evs := range ContainerTransitionPaths() {
		tr := ContainerTransitionTable[i]
		if _, passed := replay(ContainerInitialState, evs, containerGuardNames[:], fireContainer); len(evs) == 0 || !passed[tr.To] {
			t.Errorf("container transition %d (%s -%s-> %s): path %v does not take it", i, tr.From, tr.Event, tr.To, evs)
		}
	}
	for i, evs := range SandboxTransitionPaths() {
		tr := SandboxTransitionTable[i]
		if end, _ := replay(SandboxInitialState, evs, sandboxGuardNames[:], fireSandbox); len(evs) == 0 || !end[tr.To] {
			t.Errorf("sandbox transition %d (%s -%s-> %s): path %v does not take it", i, tr.From, tr.Event, tr.To, evs)
		}
	}
}

func TestStepString(t *testing.T) {
	m := NewPodMachine(guards{})
	st, err := m.Fire(PodEventUpdate)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.String(); got != "pending -> syncing on update / sync_pod" {
		t.Errorf("step = %q", got)
	}
	st, _ = m.Fire(PodEventSyncOk)
	st, _ = m.Fire(PodEventKill)
	st, _ = m.Fire(PodEventUpdate)
	if got := st.String(); got != "terminating: internal on update" {
		t.Errorf("step = %q", got)
	}
}
