package inbox

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/speclet/speclet/engine/config"
)

func pod(image string, grace int64) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{{Name: "c", Image: image}}}}
}

func grace(p *v1.Pod) int64 { return *p.Spec.TerminationGracePeriodSeconds }

// show renders what a worker takes: "op:image" for a config input, the
// kind's name and its payload for the others.
func show(ins []Input[string]) string {
	var out []string
	for _, in := range ins {
		switch in.Kind {
		case Config:
			out = append(out, fmt.Sprintf("%s:%s", in.Op, in.Pod.Spec.Containers[0].Image))
		default:
			out = append(out, [...]string{"config", "pleg", "sync", "probe", "orphan", "name-free", "evict"}[in.Kind]+in.P)
		}
	}
	return strings.Join(out, " ")
}

// TestCoalesce: what a worker takes after a burst of posts. Only the newest
// pending config input counts and comes first; a pending kill is never
// replaced by a later non-kill; a status-only change keeps the pending
// op with the newest pod; a sync waits once; other inputs keep their
// order.
func TestCoalesce(t *testing.T) {
	type post struct {
		kind  Kind
		op    config.Op
		image string // of a config input; the payload of the others
	}
	for _, tc := range []struct {
		name  string
		posts []post
		want  string
	}{
		{"newest update wins", []post{{Config, config.OpAdd, "a"}, {Config, config.OpUpdate, "b"}, {Config, config.OpUpdate, "c"}, {Sync, 0, ""}},
			"UPDATE:c sync"},
		{"a kill is kept over a later add", []post{{Config, config.OpAdd, "a"}, {Config, config.OpRemove, "a"}, {Config, config.OpAdd, "b"}},
			"REMOVE:a"},
		{"a later kill replaces an update", []post{{Config, config.OpUpdate, "a"}, {Config, config.OpDelete, "b"}},
			"DELETE:b"},
		{"a reconcile keeps the pending add with the newest pod", []post{{Config, config.OpAdd, "a"}, {Config, config.OpReconcile, "b"}},
			"ADD:b"},
		{"a reconcile alone is a reconcile", []post{{Config, config.OpReconcile, "a"}, {Config, config.OpReconcile, "b"}},
			"RECONCILE:b"},
		{"one sync waits; runtime news keep their order", []post{{Sync, 0, ""}, {PLEG, 0, "1"}, {Sync, 0, ""}, {Probe, 0, "2"}, {PLEG, 0, "3"}, {Config, config.OpUpdate, "x"}},
			"UPDATE:x sync pleg1 probe2 pleg3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New[string](grace)
			for _, p := range tc.posts {
				in := Input[string]{Kind: p.kind, Op: p.op}
				if p.kind == Config {
					in.Pod = pod(p.image, 30)
				} else {
					in.P = p.image
				}
				b.Post(in)
			}
			if n := b.Len(); n != len(strings.Fields(tc.want)) {
				t.Errorf("Len %d before the take, want %d", n, len(strings.Fields(tc.want)))
			}
			ins, _, cancel, ok := b.Take(context.Background())
			if !ok {
				t.Fatal("Take reports the inbox stopped")
			}
			defer cancel()
			if got := show(ins); got != tc.want {
				t.Errorf("took %q, want %q", got, tc.want)
			}
			if b.Len() != 0 {
				t.Errorf("Len %d after the take, want 0", b.Len())
			}
		})
	}
}

// TestKillCancelsRunningActions: the first kill, and a kill with a shorter
// grace period, cancel the actions of the batch being handled; a repeated
// kill does not; an eviction always does.
func TestKillCancelsRunningActions(t *testing.T) {
	b := New[string](grace)
	for i, s := range []struct {
		kind       Kind
		grace      int64
		wantCancel bool
	}{{Config, 30, true}, {Config, 30, false}, {Config, 5, true}, {Config, 10, false}, {Evict, 0, true}} {
		_, ctx, cancel, _ := b.Take(context.Background())
		b.Post(Input[string]{Kind: s.kind, Op: config.OpRemove, Pod: pod("a", s.grace)})
		if got := ctx.Err() != nil; got != s.wantCancel {
			t.Errorf("post %d (%v, grace %d s): cancelled = %t, want %t", i, s.kind, s.grace, got, s.wantCancel)
		}
		cancel()
	}
	if !b.KillPosted() || b.Orphan() {
		t.Errorf("KillPosted %v, Orphan %v; want a kill and no orphan", b.KillPosted(), b.Orphan())
	}
}

// TestPutBackAndStop: what a cancelled batch left comes back before what
// was posted since; an orphan stop counts as a kill; a stopped inbox drops
// everything and wakes its worker to end.
func TestPutBackAndStop(t *testing.T) {
	b := New[string](grace)
	b.Post(Input[string]{Kind: PLEG, P: "1"})
	b.Post(Input[string]{Kind: PLEG, P: "2"})
	ins, _, cancel, _ := b.Take(context.Background())
	cancel()
	<-b.Wake()
	b.Post(Input[string]{Kind: Orphan, Pod: pod("o", 2), P: "!"})
	b.PutBack(ins[1:])
	ins, _, cancel, _ = b.Take(context.Background())
	cancel()
	if got := show(ins); got != "pleg2 orphan!" {
		t.Errorf("after the put-back: %q, want \"pleg2 orphan!\"", got)
	}
	if !b.KillPosted() || !b.Orphan() {
		t.Errorf("KillPosted %v, Orphan %v after an orphan stop; want both", b.KillPosted(), b.Orphan())
	}
	select {
	case <-b.Wake():
	default:
	}
	b.Stop()
	b.Post(Input[string]{Kind: Sync})
	select {
	case <-b.Wake():
	default:
		t.Error("Stop did not wake the worker")
	}
	if _, _, _, ok := b.Take(context.Background()); ok || !b.Stopped() || b.Len() != 0 {
		t.Errorf("a stopped inbox: Take ok %v, Stopped %v, Len %d; want false, true, 0", ok, b.Stopped(), b.Len())
	}
}

// TestTakeKeepsNothing: after Take the inbox holds no queue, neither the
// inputs taken nor an array for the next ones, with or without a config
// input first; the inputs come out in order.
func TestTakeKeepsNothing(t *testing.T) {
	b := New[string](grace)
	for _, withConfig := range []bool{false, true} {
		if withConfig {
			b.Post(Input[string]{Kind: Config, Op: config.OpUpdate, Pod: pod("a", 1)})
		}
		b.Post(Input[string]{Kind: Sync, P: "s"})
		b.Post(Input[string]{Kind: PLEG, P: "e"})
		ins, _, cancel, ok := b.Take(context.Background())
		cancel()
		want := "syncs plege"
		if withConfig {
			want = "UPDATE:a " + want
		}
		if got := show(ins); !ok || got != want {
			t.Errorf("took %q, want %q", got, want)
		}
		if b.queue != nil || b.cfg != nil {
			t.Errorf("after Take the inbox keeps a queue of %d (cap %d), config %v", len(b.queue), cap(b.queue), b.cfg)
		}
	}
}
