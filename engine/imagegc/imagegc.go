// Package imagegc is the decision core of kubelet's image garbage collector
// (pkg/kubelet/images/image_gc_manager.go): it remembers when each image was
// first seen and last used, and when the image filesystem's usage reaches
// --image-gc-high-threshold it picks the images to remove, least recently
// used first, until usage would be down to --image-gc-low-threshold — never
// an image a container uses, a pinned image, or one first seen less than
// --minimum-image-ttl-duration ago. It is pure: the caller lists images and
// containers, reads ImageFsInfo and removes what Plan returns.
//
// # Usage
//
//	m := imagegc.New(imagegc.Policy{High: 85, Low: 80, MinAge: 2 * time.Minute})
//	m.Observe(now, images, inUse)          // every housekeeping pass
//	ids, need := m.Plan(now, imagegc.Usage{Used: u, Capacity: c})
package imagegc

import (
	"fmt"
	"sort"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Policy is kubelet's image GC policy.
type Policy struct {
	High, Low int           // percent of the image filesystem; defaults 85 and 80
	MinAge    time.Duration // --minimum-image-ttl-duration; default 2 m
}

// Check validates the policy as kubelet does; errors name the flags.
func (p Policy) Check() error {
	if p.High < 0 || p.High > 100 {
		return fmt.Errorf("--image-gc-high-threshold: %d: want 0..100", p.High)
	}
	if p.Low < 0 || p.Low > 100 {
		return fmt.Errorf("--image-gc-low-threshold: %d: want 0..100", p.Low)
	}
	if p.Low > p.High {
		return fmt.Errorf("--image-gc-low-threshold (%d) must not exceed --image-gc-high-threshold (%d)", p.Low, p.High)
	}
	if p.MinAge < 0 {
		return fmt.Errorf("--minimum-image-ttl-duration: %s: want 0 or more", p.MinAge)
	}
	return nil
}

// Usage of the image filesystem: bytes used (ImageFsInfo) of its capacity
// (statfs of its mount point).
type Usage struct {
	Used, Capacity uint64
}

type record struct {
	size      uint64
	pinned    bool
	firstSeen time.Time
	lastUsed  time.Time
	inUse     bool // a container used it at the last Observe
}

// Manager keeps the image records between passes. Not safe for concurrent
// use: one housekeeping goroutine owns it.
type Manager struct {
	policy  Policy
	records map[string]*record // by image ID
}

// New returns a manager with policy (kubelet's defaults for zero values of
// High and Low).
func New(p Policy) *Manager {
	if p.High == 0 && p.Low == 0 {
		p.High, p.Low = 85, 80
	}
	return &Manager{policy: p, records: map[string]*record{}}
}

// Observe records the images present at now; an image in inUse (by ID) is
// used now. Images gone from the list are forgotten.
func (m *Manager) Observe(now time.Time, images []*runtimeapi.Image, inUse map[string]bool) {
	seen := make(map[string]bool, len(images))
	for _, img := range images {
		seen[img.Id] = true
		r := m.records[img.Id]
		if r == nil {
			r = &record{firstSeen: now}
			m.records[img.Id] = r
		}
		r.size, r.pinned, r.inUse = img.Size, img.Pinned, inUse[img.Id]
		if r.inUse {
			r.lastUsed = now
		}
	}
	for id := range m.records {
		if !seen[id] {
			delete(m.records, id)
		}
	}
}

// Plan returns the images to remove at now, least recently used first, and
// the bytes that must be freed (0 below the high threshold). Images used at
// the last Observe, pinned images and images younger than MinAge are never
// in the plan; when they are all that is left, the plan frees less than
// needed (kubelet then reports "Failed to garbage collect required amount
// of images").
func (m *Manager) Plan(now time.Time, u Usage) (ids []string, need uint64) {
	if u.Capacity == 0 || u.Used*100 < uint64(m.policy.High)*u.Capacity {
		return nil, 0
	}
	target := u.Capacity * uint64(m.policy.Low) / 100
	if u.Used <= target {
		return nil, 0
	}
	need = u.Used - target
	var freed uint64
	for _, c := range m.candidates(now) {
		if freed >= need {
			break
		}
		ids = append(ids, c.id)
		freed += c.r.size
	}
	return ids, need
}

// Unused returns every image that may be removed at now (not in use, not
// pinned, first seen at least MinAge ago), least recently used first, and
// the sum of their sizes: kubelet's DeleteUnusedImages, the eviction
// manager's node-level reclaim.
func (m *Manager) Unused(now time.Time) (ids []string, size uint64) {
	for _, c := range m.candidates(now) {
		ids = append(ids, c.id)
		size += c.r.size
	}
	return ids, size
}

type candidate struct {
	id string
	r  *record
}

// candidates are the removable images at now, least recently used first,
// then first seen first, then by ID.
func (m *Manager) candidates(now time.Time) []candidate {
	var cs []candidate
	for id, r := range m.records {
		if r.pinned || r.inUse || now.Sub(r.firstSeen) < m.policy.MinAge {
			continue
		}
		cs = append(cs, candidate{id, r})
	}
	sort.Slice(cs, func(i, j int) bool {
		a, b := cs[i].r, cs[j].r
		if !a.lastUsed.Equal(b.lastUsed) {
			return a.lastUsed.Before(b.lastUsed)
		}
		if !a.firstSeen.Equal(b.firstSeen) {
			return a.firstSeen.Before(b.firstSeen)
		}
		return cs[i].id < cs[j].id
	})
	return cs
}
