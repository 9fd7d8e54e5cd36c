package containergc

import (
	"fmt"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	created = runtimeapi.ContainerState_CONTAINER_CREATED
	unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
)

// unit builds the instances of one container of a pod, attempts 0..n-1,
// attempt i created i minutes after t0 and named pod/name#i; the states
// are given oldest first.
func unit(pod, name string, states ...runtimeapi.ContainerState) []Instance {
	var out []Instance
	for i, st := range states {
		out = append(out, Instance{ID: fmt.Sprintf("%s/%s#%d", pod, name, i), Unit: Unit{PodUID: pod, Name: name},
			Attempt: uint32(i), Created: t0.Add(time.Duration(i) * time.Minute), State: st})
	}
	return out
}

func join(units ...[]Instance) []Instance {
	var out []Instance
	for _, u := range units {
		out = append(out, u...)
	}
	return out
}

func TestPlan(t *testing.T) {
	now := t0.Add(time.Hour)
	for _, tc := range []struct {
		name   string
		policy Policy
		in     []Instance
		want   string // IDs in removal order
	}{
		{
			name:   "per container: the oldest beyond the limit, never a running one",
			policy: Policy{MaxPerContainer: 2, MaxContainers: -1},
			in:     unit("a", "c", exited, exited, exited, exited, running),
			want:   "a/c#0 a/c#1",
		},
		{
			name:   "limit 0 counts as 1: the newest dead stays",
			policy: Policy{MaxPerContainer: 0, MaxContainers: -1},
			in:     unit("a", "c", exited, exited, exited),
			want:   "a/c#0 a/c#1",
		},
		{
			name:   "no node-wide limit: units of other pods are not touched",
			policy: Policy{MaxPerContainer: 5, MaxContainers: -1},
			in:     join(unit("a", "c", exited, exited, exited), unit("b", "c", exited, exited, exited)),
			want:   "",
		},
		{
			name:   "node-wide: max/units per unit (6/3 = 2)",
			policy: Policy{MaxPerContainer: 10, MaxContainers: 6},
			in: join(unit("a", "c", exited, exited, exited, exited), unit("b", "c", exited, exited, exited),
				unit("c", "c", exited, exited, running)),
			want: "a/c#0 a/c#1 b/c#0",
		},
		{
			name:   "node-wide below the units: one per unit, the newest dead kept",
			policy: Policy{MaxPerContainer: 10, MaxContainers: 2},
			in:     join(unit("a", "c", exited, exited), unit("b", "c", exited, exited), unit("c", "c", exited, exited)),
			want:   "a/c#0 b/c#0 c/c#0",
		},
		{
			name: "node-wide, then the oldest across units: an instance the min age keeps makes an older one removable",
			// a's newest dead (#2) is younger than the min age: a's
			// evictable #0, #1 are not needed for lastState, and go
			// oldest first (lowest attempt, as kubelet) once every unit
			// holds one.
			policy: Policy{MaxPerContainer: 10, MaxContainers: 1, MinAge: 30 * time.Minute},
			in: join(
				[]Instance{
					{ID: "a/c#0", Unit: Unit{"a", "c"}, Attempt: 0, Created: t0, State: exited},
					{ID: "a/c#1", Unit: Unit{"a", "c"}, Attempt: 1, Created: t0.Add(time.Minute), State: exited},
					{ID: "a/c#2", Unit: Unit{"a", "c"}, Attempt: 2, Created: now.Add(-time.Minute), State: exited},
				},
				unit("b", "c", exited, exited)),
			want: "a/c#0 b/c#0 a/c#1",
		},
		{
			// #2 (58 min old) is young: it stays and does not count, so
			// #1 is the one kept of the evictable ones (as kubelet).
			name:   "min age: young dead instances stay and do not count",
			policy: Policy{MaxPerContainer: 1, MaxContainers: -1, MinAge: 58*time.Minute + 30*time.Second},
			in:     unit("a", "c", exited, exited, exited),
			want:   "a/c#0",
		},
		{
			name:   "a created instance: the newest may be starting, an older one never started and is dead",
			policy: Policy{MaxPerContainer: 1, MaxContainers: -1},
			in:     unit("a", "c", exited, created, exited, created),
			want:   "a/c#0 a/c#1",
		},
		{
			name:   "unknown instances are never planned",
			policy: Policy{MaxPerContainer: 1, MaxContainers: 0},
			in:     unit("a", "c", unknown, exited, exited),
			want:   "a/c#1",
		},
		{
			name:   "running only: nothing",
			policy: Policy{MaxPerContainer: 1, MaxContainers: 0},
			in:     join(unit("a", "c", running), unit("b", "c", running)),
			want:   "",
		},
		{
			name:   "two containers of one pod are two units",
			policy: Policy{MaxPerContainer: 1, MaxContainers: -1},
			in:     join(unit("a", "x", exited, exited), unit("a", "y", exited, exited, running)),
			want:   "a/x#0 a/y#0",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(Plan(now, tc.policy, tc.in), " ")
			if got != tc.want {
				t.Errorf("Plan = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{MaxContainers: -1}, ""},
		{Policy{MaxContainers: 0}, ""},
		{Policy{MaxContainers: -2}, "--maximum-dead-containers: -2: want -1 (no limit) or more"},
		{Policy{MaxPerContainer: -1, MaxContainers: -1}, "--maximum-dead-containers-per-container: -1"},
		{Policy{MinAge: -time.Second, MaxContainers: -1}, "--minimum-container-ttl-duration: -1s"},
	} {
		err := tc.p.Check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: Check() = %v, want %q", tc.p, err, tc.want)
		}
	}
}

// BenchmarkPlan1000: one container GC pass over 1,000 pods of one
// container, each with 5 dead instances and a running one (6,000
// instances), a node-wide limit of 100.
func BenchmarkPlan1000(b *testing.B) {
	var in []Instance
	for i := range 1000 {
		in = append(in, unit(fmt.Sprintf("pod-%04d", i), "app", exited, exited, exited, exited, exited, running)...)
	}
	now := t0.Add(time.Hour)
	p := Policy{MaxPerContainer: 5, MaxContainers: 100}
	for b.Loop() {
		if n := len(Plan(now, p, in)); n != 4000 {
			b.Fatalf("%d planned, want 4000", n)
		}
	}
}
