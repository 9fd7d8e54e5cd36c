package imagegc

import (
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func img(id string, size uint64, pinned bool) *runtimeapi.Image {
	return &runtimeapi.Image{Id: id, Size: size, Pinned: pinned}
}

// TestPlan walks kubelet's image GC on a 1000-byte image filesystem with a
// fake clock: nothing below 85%; at 90% it frees down to 80%, least
// recently used first, skipping the image in use, the pinned one and the
// one younger than the minimum age.
func TestPlan(t *testing.T) {
	m := New(Policy{High: 85, Low: 80, MinAge: 2 * time.Minute})
	t0 := time.Unix(0, 0)
	all := []*runtimeapi.Image{img("old", 50, false), img("mid", 60, false), img("used", 300, false), img("pause", 10, true)}
	m.Observe(t0, all, map[string]bool{"mid": true, "used": true})
	m.Observe(t0.Add(time.Minute), all, map[string]bool{"used": true})
	young := append(all, img("young", 200, false))
	m.Observe(t0.Add(4*time.Minute), young, map[string]bool{"used": true})
	now := t0.Add(5 * time.Minute)

	if ids, need := m.Plan(now, Usage{Used: 840, Capacity: 1000}); ids != nil || need != 0 {
		t.Errorf("84%%: plan %v need %d, want nothing", ids, need)
	}
	ids, need := m.Plan(now, Usage{Used: 900, Capacity: 1000})
	if need != 100 {
		t.Errorf("90%%: need %d, want 100 (down to 80%%)", need)
	}
	if !slices.Equal(ids, []string{"old", "mid"}) {
		t.Errorf("90%%: plan %v, want old (never used) then mid (used at +1m); not used, pause (pinned) or young (< 2m)", ids)
	}
	// Enough freed by the first candidate: only it is planned.
	if ids, _ := m.Plan(now, Usage{Used: 850, Capacity: 1000}); !slices.Equal(ids, []string{"old"}) {
		t.Errorf("85%%: plan %v, want old only", ids)
	}
	// Later the young image is old enough: never used, it ranks before mid
	// (last used at +1m), after old (first seen earlier); 250 bytes suffice.
	m.Observe(t0.Add(10*time.Minute), young, map[string]bool{"used": true})
	if ids, _ := m.Plan(t0.Add(10*time.Minute), Usage{Used: 1000, Capacity: 1000}); !slices.Equal(ids, []string{"old", "young"}) {
		t.Errorf("100%%: plan %v, want old, young", ids)
	}
	// An image gone from the runtime is forgotten.
	m.Observe(t0.Add(11*time.Minute), all[1:], nil)
	if ids, _ := m.Plan(t0.Add(11*time.Minute), Usage{Used: 1000, Capacity: 1000}); slices.Contains(ids, "old") {
		t.Errorf("plan %v names a removed image", ids)
	}
}

func TestPolicyCheck(t *testing.T) {
	for _, p := range []Policy{{High: 101, Low: 80}, {High: 80, Low: 85}, {High: 85, Low: -1}, {High: 85, Low: 80, MinAge: -time.Second}} {
		if err := p.Check(); err == nil {
			t.Errorf("%+v: no error", p)
		}
	}
	if err := (Policy{High: 85, Low: 80, MinAge: 2 * time.Minute}).Check(); err != nil {
		t.Error(err)
	}
}

// BenchmarkPlan1000 is one image GC pass over 1,000 images.
func BenchmarkPlan1000(b *testing.B) {
	m := New(Policy{High: 85, Low: 80})
	imgs := make([]*runtimeapi.Image, 1000)
	for i := range imgs {
		imgs[i] = img(string(rune('a'+i%26))+string(rune(i)), 1000, false)
	}
	t0 := time.Unix(0, 0)
	for i := 0; b.Loop(); i++ {
		now := t0.Add(time.Duration(i) * time.Minute)
		m.Observe(now, imgs, nil)
		m.Plan(now, Usage{Used: 900000, Capacity: 1000000})
	}
}
