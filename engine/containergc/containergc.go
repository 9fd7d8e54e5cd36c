// Package containergc is the decision core of kubelet's container garbage
// collector across pods (pkg/kubelet/kuberuntime/kuberuntime_gc.go,
// evictContainers): given every container instance of the runtime, it
// picks the dead ones to remove so that each container of a pod (an evict
// unit) keeps at most --maximum-dead-containers-per-container and the node
// at most --maximum-dead-containers. It is pure: the caller lists the
// containers and removes what Plan returns, in order.
//
// Unlike kubelet, the newest dead instance of every container is never
// removed: it is the container's lastState (or its current state while it
// waits to restart) and what `kubectl logs --previous` reads. So the node
// keeps at least one dead instance per container that has died, whatever
// the node-wide limit.
//
// # Usage
//
//	p := containergc.Policy{MinAge: 0, MaxPerContainer: 1, MaxContainers: 100}
//	ids := containergc.Plan(now, p, instances) // remove in this order
package containergc

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Policy is kubelet's container GC policy.
type Policy struct {
	// MinAge: an instance created less than this long ago is not
	// removed (--minimum-container-ttl-duration).
	MinAge time.Duration
	// MaxPerContainer is how many dead instances one container of a pod
	// keeps (--maximum-dead-containers-per-container); below 1 counts as 1.
	MaxPerContainer int
	// MaxContainers is how many dead instances the node keeps
	// (--maximum-dead-containers); negative: no node-wide limit.
	MaxContainers int
}

// Check validates the policy; errors name the flags.
func (p Policy) Check() error {
	if p.MinAge < 0 {
		return fmt.Errorf("--minimum-container-ttl-duration: %s: want 0 or more", p.MinAge)
	}
	if p.MaxPerContainer < 0 {
		return fmt.Errorf("--maximum-dead-containers-per-container: %d: want 0 or more", p.MaxPerContainer)
	}
	if p.MaxContainers < -1 {
		return fmt.Errorf("--maximum-dead-containers: %d: want -1 (no limit) or more", p.MaxContainers)
	}
	return nil
}

// Unit is kubelet's evict unit: one container of one pod.
type Unit struct {
	PodUID string
	Name   string
}

// Instance is one container instance of the runtime.
type Instance struct {
	ID      string
	Unit    Unit
	Attempt uint32
	Created time.Time
	State   runtimeapi.ContainerState
}

// newerFirst orders a unit's instances as kubelet does (byAttempt): the
// highest attempt first, then the latest created.
func newerFirst(a, b Instance) int {
	if c := cmp.Compare(b.Attempt, a.Attempt); c != 0 {
		return c
	}
	if c := b.Created.Compare(a.Created); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// Plan returns the IDs of the instances to remove at now, in order: first
// those beyond MaxPerContainer in each unit, oldest first; then, while the
// node holds more than MaxContainers removable dead instances, those beyond
// max(MaxContainers/units, 1) per unit; then the oldest across units.
//
// An instance counts (kubelet's evictable containers) when it is dead
// (exited, or created and never started while a newer instance exists) and
// was created at least MinAge ago. Never planned: a running or unknown
// instance, the newest instance of a unit, and the newest dead instance of
// a unit.
func Plan(now time.Time, p Policy, instances []Instance) []string {
	byUnit := map[Unit][]Instance{}
	for _, in := range instances {
		byUnit[in.Unit] = append(byUnit[in.Unit], in)
	}
	keys := make([]Unit, 0, len(byUnit))
	for u := range byUnit {
		keys = append(keys, u)
	}
	slices.SortFunc(keys, func(a, b Unit) int {
		return cmp.Or(cmp.Compare(a.PodUID, b.PodUID), cmp.Compare(a.Name, b.Name))
	})

	// evictable: per unit, newest first.
	evictable := map[Unit][]Instance{}
	kept := map[string]bool{} // the newest dead instance of each unit
	for _, u := range keys {
		ins := byUnit[u]
		slices.SortFunc(ins, newerFirst)
		newestDead := true
		for i, in := range ins {
			dead := in.State == runtimeapi.ContainerState_CONTAINER_EXITED ||
				in.State == runtimeapi.ContainerState_CONTAINER_CREATED && i > 0
			if !dead {
				continue
			}
			if newestDead {
				kept[in.ID] = true
				newestDead = false
			}
			if now.Sub(in.Created) < p.MinAge {
				continue
			}
			evictable[u] = append(evictable[u], in)
		}
	}

	var out []string
	// trim keeps the newest n removable instances of each unit.
	trim := func(n int) {
		for _, u := range keys {
			ins := evictable[u]
			if len(ins) <= n {
				continue
			}
			var keep []Instance
			for i, in := range ins {
				if i < n || kept[in.ID] {
					keep = append(keep, in)
				}
			}
			for i := len(ins) - 1; i >= 0; i-- { // oldest first
				if i >= n && !kept[ins[i].ID] {
					out = append(out, ins[i].ID)
				}
			}
			evictable[u] = keep
		}
	}
	total := func() (n int) {
		for _, ins := range evictable {
			n += len(ins)
		}
		return n
	}

	trim(max(p.MaxPerContainer, 1))
	if p.MaxContainers < 0 || total() <= p.MaxContainers {
		return out
	}
	units := 0
	for _, ins := range evictable {
		if len(ins) > 0 {
			units++
		}
	}
	trim(max(p.MaxContainers/units, 1))
	n := total()
	if n <= p.MaxContainers {
		return out
	}
	var flat []Instance
	for _, u := range keys {
		flat = append(flat, evictable[u]...)
	}
	slices.SortFunc(flat, func(a, b Instance) int { return newerFirst(b, a) }) // oldest first
	for _, in := range flat {
		if n <= p.MaxContainers {
			break
		}
		if kept[in.ID] {
			continue
		}
		out = append(out, in.ID)
		n--
	}
	return out
}
