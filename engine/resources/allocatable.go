// Node allocatable and eviction thresholds (--kube-reserved,
// --system-reserved, --eviction-hard).

package resources

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ParseList parses a flag value "cpu=200m,memory=1Gi" (kubelet's
// --kube-reserved, --system-reserved). flag names the flag in errors.
func ParseList(flag, s string) (v1.ResourceList, error) {
	out := v1.ResourceList{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--%s: %q: want name=quantity", flag, kv)
		}
		switch name := v1.ResourceName(k); {
		case name == v1.ResourceCPU, name == v1.ResourceMemory, name == v1.ResourceEphemeralStorage, name == "pid":
		default:
			if _, ok := HugePageSize(name); !ok {
				return nil, fmt.Errorf("--%s: unknown resource %q (cpu, memory, ephemeral-storage, pid, hugepages-<size>)", flag, k)
			}
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("--%s: %s=%q: %w", flag, k, v, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("--%s: %s=%q: must not be negative", flag, k, v)
		}
		out[v1.ResourceName(k)] = q
	}
	return out, nil
}

// Allocatable is node allocatable: capacity minus kube-reserved, minus
// system-reserved, minus the hard eviction threshold of memory (and of
// ephemeral storage for nodefs) — kubelet's GetNodeAllocatableAbsolute with
// the eviction reservation. Never negative.
func Allocatable(capacity, kubeReserved, systemReserved, evictionReserved v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for name, c := range capacity {
		v := c.DeepCopy()
		for _, r := range []v1.ResourceList{kubeReserved, systemReserved, evictionReserved} {
			if q, ok := r[name]; ok {
				v.Sub(q)
			}
		}
		if v.Sign() < 0 {
			v = *resource.NewQuantity(0, c.Format)
		}
		out[name] = v
	}
	return out
}

// String renders a list as "cpu=2,memory=8Gi" in name order, for logs.
func String(list v1.ResourceList) string {
	names := make([]string, 0, len(list))
	for n := range list {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for i, n := range names {
		q := list[v1.ResourceName(n)]
		names[i] = n + "=" + q.String()
	}
	return strings.Join(names, ",")
}

// Threshold is one eviction threshold of --eviction-hard or --eviction-soft:
// signal < quantity, or signal < percentage of capacity.
type Threshold struct {
	Signal     string
	Quantity   *resource.Quantity // nil when Percentage is set
	Percentage float64            // 0..1
}

// Signals kubelet's eviction manager knows, and the resource each measures.
var Signals = map[string]v1.ResourceName{
	"memory.available": v1.ResourceMemory,
	// allocatableMemory.available: kubelet adds it when node allocatable
	// is enforced on pods; it may also be given.
	"allocatableMemory.available": v1.ResourceMemory,
	"nodefs.available":            v1.ResourceEphemeralStorage,
	"nodefs.inodesFree":           "inodes",
	"imagefs.available":           v1.ResourceEphemeralStorage,
	"imagefs.inodesFree":          "inodes",
	"pid.available":               "pid",
	"containerfs.available":       v1.ResourceEphemeralStorage,
}

// DefaultEvictionHard is kubelet's default --eviction-hard on Linux.
const DefaultEvictionHard = "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%"

// ParseThresholds parses "memory.available<100Mi,nodefs.available<10%".
// flag names the flag in errors.
func ParseThresholds(flag, s string) ([]Threshold, error) {
	var out []Threshold
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		sig, val, ok := strings.Cut(item, "<")
		if !ok {
			return nil, fmt.Errorf("--%s: %q: want signal<quantity or signal<percent%%", flag, item)
		}
		if _, known := Signals[sig]; !known {
			return nil, fmt.Errorf("--%s: %q: unknown signal %q", flag, item, sig)
		}
		if seen[sig] {
			return nil, fmt.Errorf("--%s: signal %q given twice", flag, sig)
		}
		seen[sig] = true
		t := Threshold{Signal: sig}
		if p, ok := strings.CutSuffix(val, "%"); ok {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil || f < 0 || f > 100 {
				return nil, fmt.Errorf("--%s: %q: want a percentage in 0..100", flag, item)
			}
			t.Percentage = f / 100
		} else {
			q, err := resource.ParseQuantity(val)
			if err != nil || q.Sign() < 0 {
				return nil, fmt.Errorf("--%s: %q: want a non-negative quantity", flag, item)
			}
			t.Quantity = &q
		}
		out = append(out, t)
	}
	return out, nil
}

// Value is the threshold in the signal's unit on a node with capacity.
func (t Threshold) Value(capacity resource.Quantity) int64 {
	if t.Quantity != nil {
		return t.Quantity.Value()
	}
	return int64(float64(capacity.Value()) * t.Percentage)
}

// EvictionReserve is what the hard thresholds take from allocatable
// (kubelet's hardEvictionReservation): the memory.available threshold as
// memory and, when capacity has ephemeral-storage, the nodefs.available
// threshold as ephemeral-storage.
func EvictionReserve(hard []Threshold, capacity v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for _, t := range hard {
		switch t.Signal {
		case "memory.available":
			out[v1.ResourceMemory] = *resource.NewQuantity(t.Value(capacity[v1.ResourceMemory]), resource.BinarySI)
		case "nodefs.available":
			if c, ok := capacity[v1.ResourceEphemeralStorage]; ok {
				out[v1.ResourceEphemeralStorage] = *resource.NewQuantity(t.Value(c), resource.BinarySI)
			}
		}
	}
	return out
}

// MustList is ParseList for literals in tests and examples; it panics on a
// bad list.
func MustList(s string) v1.ResourceList {
	l, err := ParseList("list", s)
	if err != nil {
		panic(err)
	}
	return l
}
