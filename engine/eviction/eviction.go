// Package eviction is the decision core of kubelet's eviction manager
// (pkg/kubelet/eviction: helpers.go, eviction_manager.go synchronize): from
// observed signals and the configured thresholds it decides which
// thresholds are met (hard at once, soft after their grace period), which
// node conditions hold (MemoryPressure, DiskPressure, PIDPressure, kept for
// the pressure transition period after the last breach), whether a new pod
// may be admitted, and in which order pods are evicted. It is pure: the
// caller observes the node, reclaims node-level resources and kills pods.
//
// # Usage
//
//	m := eviction.NewManager(eviction.Config{Hard: hard, Soft: soft, Grace: grace, Transition: 5 * time.Minute})
//	d := m.Observe(now, eviction.Observations{"memory.available": {Available: a, Capacity: c}})
//	conds := m.Conditions()        // for the node status
//	if d.Signal != "" { victims := eviction.Rank(d.Signal, pods) }
package eviction

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/speclet/speclet/engine/resources"
)

// Node conditions the eviction manager sets.
const (
	MemoryPressure v1.NodeConditionType = "MemoryPressure"
	DiskPressure   v1.NodeConditionType = "DiskPressure"
	PIDPressure    v1.NodeConditionType = "PIDPressure"
)

// Condition is the node condition a signal's threshold sets.
func Condition(signal string) v1.NodeConditionType {
	switch {
	case signal == "memory.available" || signal == AllocatableMemory:
		return MemoryPressure
	case signal == "pid.available":
		return PIDPressure
	}
	return DiskPressure
}

// AllocatableMemory is kubelet's allocatableMemory.available: the memory
// left to pods under the pods cgroup's limit (node allocatable enforced),
// that limit less the pods' working set. Its hard thresholds are those of
// memory.available (WithAllocatableMemory).
const AllocatableMemory = "allocatableMemory.available"

// WithAllocatableMemory adds to hard thresholds a copy of each
// memory.available threshold for allocatableMemory.available, as kubelet
// does when node allocatable is enforced on pods
// (--enforce-node-allocatable=pods).
func WithAllocatableMemory(hard []resources.Threshold) []resources.Threshold {
	out := append([]resources.Threshold{}, hard...)
	for _, t := range hard {
		if t.Signal == "memory.available" {
			c := t
			c.Signal = AllocatableMemory
			out = append(out, c)
		}
	}
	return out
}

// Observation is one signal's measurement: what is available of what
// capacity (bytes, inodes or PIDs).
type Observation struct {
	Available, Capacity int64
}

// Observations by signal name ("memory.available", ...).
type Observations map[string]Observation

// Config is the manager's thresholds (kubelet's flags).
type Config struct {
	Hard, Soft []resources.Threshold // --eviction-hard, --eviction-soft
	// Grace is --eviction-soft-grace-period per signal; a soft threshold
	// without one is refused by ParseGrace's caller.
	Grace map[string]time.Duration
	// MinReclaim is --eviction-minimum-reclaim per signal: once met, a
	// threshold stays met until available exceeds it by this much.
	MinReclaim map[string]resource.Quantity
	// Transition is --eviction-pressure-transition-period (default 5 m).
	Transition time.Duration
}

// Decision is the outcome of one observation.
type Decision struct {
	// Signal is the met threshold to act on ("" = none): the first met
	// hard threshold, else the first soft one whose grace has passed.
	// Memory comes before disk, disk before PIDs (kubelet's order).
	Signal string
	Hard   bool
	// Threshold and Available are for the eviction message.
	Threshold, Available int64
	// Met lists every met threshold's signal (hard, or soft past grace).
	Met []string
}

// Message is kubelet's eviction message for the signal (nodeLowMessageFmt),
// with quantities as kubelet prints them: binary units for bytes.
func (d Decision) Message() string {
	res := resourceOf(d.Signal)
	format := resource.BinarySI
	if res == "inodes" || res == "pids" {
		format = resource.DecimalSI
	}
	q := func(v int64) string { return resource.NewQuantity(v, format).String() }
	return fmt.Sprintf("The node was low on resource: %s. Threshold quantity: %s, available: %s. ", res, q(d.Threshold), q(d.Available))
}

func resourceOf(signal string) string {
	switch signal {
	case "memory.available", AllocatableMemory:
		return "memory"
	case "pid.available":
		return "pids"
	case "nodefs.inodesFree", "imagefs.inodesFree":
		return "inodes"
	}
	return "ephemeral-storage"
}

// Manager keeps the state between observations: when each soft threshold
// was first seen met, and when each condition was last seen. Safe for
// concurrent use (the node status reads Conditions).
type Manager struct {
	cfg       Config
	mu        sync.Mutex
	softSince map[string]time.Time // signal -> first observed met (soft)
	lastSeen  map[v1.NodeConditionType]time.Time
	met       map[string]bool // thresholds met at the last observation (for minimum reclaim)
	now       time.Time
}

// NewManager returns a manager with cfg; Transition defaults to 5 minutes.
func NewManager(cfg Config) *Manager {
	if cfg.Transition == 0 {
		cfg.Transition = 5 * time.Minute
	}
	return &Manager{cfg: cfg, softSince: map[string]time.Time{}, lastSeen: map[v1.NodeConditionType]time.Time{}, met: map[string]bool{}}
}

// signalOrder: memory, then disk, then PIDs.
var signalOrder = []string{"memory.available", AllocatableMemory, "nodefs.available", "nodefs.inodesFree", "imagefs.available", "imagefs.inodesFree", "containerfs.available", "pid.available"}

// Observe takes the signals measured at now and returns what to do.
func (m *Manager) Observe(now time.Time, obs Observations) Decision {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = now
	var d Decision
	metNow := map[string]bool{}
	check := func(t resources.Threshold, hard bool) (met bool, threshold, avail int64) {
		o, ok := obs[t.Signal]
		if !ok {
			return false, 0, 0
		}
		thr := t.Value(*resource.NewQuantity(o.Capacity, resource.DecimalSI))
		limit := thr
		if m.met[key(t.Signal, hard)] { // minimum reclaim: stay met until above threshold + reclaim
			if r, ok := m.cfg.MinReclaim[t.Signal]; ok {
				limit += r.Value()
			}
		}
		return o.Available < limit, thr, o.Available
	}
	for _, sig := range signalOrder {
		for _, t := range m.cfg.Hard {
			if t.Signal != sig {
				continue
			}
			if met, thr, avail := check(t, true); met {
				metNow[key(sig, true)] = true
				d.Met = append(d.Met, sig)
				m.lastSeen[Condition(sig)] = now
				if d.Signal == "" || !d.Hard {
					d.Signal, d.Hard, d.Threshold, d.Available = sig, true, thr, avail
				}
			}
		}
		for _, t := range m.cfg.Soft {
			if t.Signal != sig {
				continue
			}
			met, thr, avail := check(t, false)
			if !met {
				delete(m.softSince, sig)
				continue
			}
			metNow[key(sig, false)] = true
			m.lastSeen[Condition(sig)] = now // the condition is set as soon as a soft threshold is crossed
			since, ok := m.softSince[sig]
			if !ok {
				m.softSince[sig] = now
				since = now
			}
			if now.Sub(since) < m.cfg.Grace[sig] {
				continue
			}
			d.Met = append(d.Met, sig)
			if d.Signal == "" {
				d.Signal, d.Threshold, d.Available = sig, thr, avail
			}
		}
	}
	m.met = metNow
	return d
}

func key(signal string, hard bool) string {
	if hard {
		return "hard/" + signal
	}
	return "soft/" + signal
}

// Conditions returns the pressure conditions that hold: a condition holds
// while a threshold of its signals was met within the transition period.
// It is the node status's view (MemoryPressure, DiskPressure, PIDPressure
// True or False).
func (m *Manager) Conditions() map[v1.NodeConditionType]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[v1.NodeConditionType]bool{MemoryPressure: false, DiskPressure: false, PIDPressure: false}
	for c, t := range m.lastSeen {
		if m.now.Sub(t) < m.cfg.Transition {
			out[c] = true
		}
	}
	return out
}

// Admit says whether a new pod may start under the current conditions
// (kubelet's eviction admission): under MemoryPressure only non-BestEffort
// pods and critical pods; under DiskPressure or PIDPressure only critical
// pods. The reason is kubelet's "Evicted" with a message naming the
// condition.
func (m *Manager) Admit(pod *v1.Pod, static bool) (ok bool, message string) {
	conds := m.Conditions()
	var on []string
	for _, c := range []v1.NodeConditionType{MemoryPressure, DiskPressure, PIDPressure} {
		if conds[c] {
			on = append(on, string(c))
		}
	}
	if len(on) == 0 || resources.IsCritical(pod, static) {
		return true, ""
	}
	if len(on) == 1 && on[0] == string(MemoryPressure) && resources.QOSClass(pod) != v1.PodQOSBestEffort {
		return true, ""
	}
	return false, fmt.Sprintf("The node had condition: [%s]. ", strings.Join(on, " "))
}

// PodUsage is a running pod and what it uses of the signal's resource.
type PodUsage struct {
	Pod    *v1.Pod
	Static bool
	// Usage is the pod's use of the resource (memory bytes, disk bytes,
	// inodes or PIDs).
	Usage int64
}

// Rank orders the pods that may be evicted for signal, first to evict first,
// as kubelet ranks them: pods whose usage exceeds their requests first, then
// lower priority first, then by usage above requests (memory; disk and
// PIDs by usage), largest first. Critical pods (static, mirror,
// system-critical priority) are left out: they are never evicted.
func Rank(signal string, pods []PodUsage) []PodUsage {
	type ranked struct {
		p      PodUsage
		over   bool  // usage above requests
		prio   int32 // spec.priority (0 when unset)
		excess int64 // usage minus requests (memory, disk); usage (inodes, PIDs)
	}
	res := resourceOf(signal)
	rs := make([]ranked, 0, len(pods))
	for _, p := range pods {
		if resources.IsCritical(p.Pod, p.Static) {
			continue
		}
		r := ranked{p: p, excess: p.Usage}
		if p.Pod.Spec.Priority != nil {
			r.prio = *p.Pod.Spec.Priority
		}
		if res == "memory" || res == "ephemeral-storage" {
			req := resources.Requests(p.Pod)
			q := req.Memory()
			if res == "ephemeral-storage" {
				q = req.StorageEphemeral()
			}
			r.excess = p.Usage - q.Value()
			r.over = r.excess > 0
		}
		rs = append(rs, r)
	}
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.over != b.over {
			return a.over
		}
		if a.prio != b.prio {
			return a.prio < b.prio
		}
		return a.excess > b.excess
	})
	out := make([]PodUsage, len(rs))
	for i, r := range rs {
		out[i] = r.p
	}
	return out
}

// ParseGrace parses --eviction-soft-grace-period "memory.available=1m30s".
func ParseGrace(flag, s string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if _, known := resources.Signals[k]; !ok || !known {
			return nil, fmt.Errorf("--%s: %q: want signal=duration with a known signal", flag, kv)
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("--%s: %q: want a non-negative duration", flag, kv)
		}
		out[k] = d
	}
	return out, nil
}
