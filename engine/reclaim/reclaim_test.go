package reclaim

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/speclet/speclet/engine/eviction"
	"github.com/speclet/speclet/fsm"
)

// TestSchedules: each pass is first due one period after Start; a pass
// that is off (no eviction manager, no node-wide container limit) has a
// negative duration, so its timer is never armed; Advance moves a fired
// pass on by whole periods past now, so a late timer does not fire twice.
func TestSchedules(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	n := New(Config{Clock: clk, Policy: Policy{ImageGCPeriod: 5 * time.Minute, EvictionPeriod: 10 * time.Second}})
	n.Start(t0)
	if d := n.NextImageGc(); d != 5*time.Minute {
		t.Errorf("next_image_gc %v after start, want 5m", d)
	}
	if d := n.NextEviction(); d >= 0 {
		t.Errorf("next_eviction %v without an eviction manager, want negative", d)
	}
	if d := n.NextContainerGc(); d >= 0 {
		t.Errorf("next_container_gc %v without a container GC period, want negative", d)
	}
	clk.SetTime(t0.Add(11 * time.Minute)) // the 5 and 10 min instants passed
	if d := n.NextImageGc(); d != 0 {
		t.Errorf("next_image_gc %v when overdue, want 0", d)
	}
	n.Advance(fsm.NodeDurationNextImageGc, clk.Now())
	if d := n.NextImageGc(); d != 4*time.Minute {
		t.Errorf("next_image_gc %v after the pass at 11 min, want 4m (the 15 min instant)", d)
	}

	on := New(Config{Clock: clk, Policy: Policy{Eviction: &eviction.Manager{}, EvictionPeriod: 10 * time.Second}, ContainerGCPeriod: time.Minute})
	on.Start(clk.Now())
	if d := on.NextEviction(); d != 10*time.Second {
		t.Errorf("next_eviction %v with an eviction manager, want 10s", d)
	}
	if d := on.NextContainerGc(); d != time.Minute {
		t.Errorf("next_container_gc %v, want 1m", d)
	}
}

// pods is a Pods whose terminating pods the test sets.
type pods map[types.UID]bool

func (p pods) Evictable() []*v1.Pod           { return nil }
func (p pods) Evict(types.UID, int64, string) {}
func (p pods) Terminating(uid types.UID) bool { return p[uid] }

// TestEvictedPodTerminating: no pod blocks eviction before one was
// evicted; the pod evicted last blocks it while its worker terminates it.
func TestEvictedPodTerminating(t *testing.T) {
	ps := pods{"a": true}
	n := New(Config{Pods: ps})
	if n.EvictedPodTerminating() {
		t.Error("terminating before any eviction")
	}
	n.lastEvicted = "a"
	if !n.EvictedPodTerminating() {
		t.Error("not terminating while the evicted pod's worker terminates it")
	}
	ps["a"] = false
	if n.EvictedPodTerminating() {
		t.Error("terminating after the evicted pod terminated")
	}
}
