package devicemanager

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/speclet/speclet/engine/devicemanager/checkpoint"
)

// Allocation of devices to containers, as kubelet's device manager does
// it at admission (its allocate-resources admit handler runs before the
// predicates): for each container (init containers first) and each device
// resource of its limits (extended resources cannot be overcommitted, so
// limits are requests), the devices given before to that container, else
// healthy devices no other container holds (those of the pod's finished
// init containers may be reused by its app containers), the plugin's
// preferred ones first when it offers GetPreferredAllocation, then the
// plugin's Allocate. A failure refuses the pod (engine/admission's
// AllocateFailed: kubelet's UnexpectedAdmissionError, "Allocate failed due
// to <error>, which is unexpected").

// allocation is one container's devices of one resource and the plugin's
// answer.
type allocation struct {
	ids  checkpoint.DevicesPerNUMA
	resp *pluginapi.ContainerAllocateResponse
}

func (a *allocation) list() []string {
	var out []string
	for _, ids := range a.ids {
		out = append(out, ids...)
	}
	sort.Strings(out)
	return out
}

// podDevices are the allocations: pod UID -> container -> resource.
type podDevices map[string]map[string]map[string]*allocation

func (p podDevices) get(uid, ctr, res string) *allocation { return p[uid][ctr][res] }

func (p podDevices) put(uid, ctr, res string, a *allocation) {
	if p[uid] == nil {
		p[uid] = map[string]map[string]*allocation{}
	}
	if p[uid][ctr] == nil {
		p[uid][ctr] = map[string]*allocation{}
	}
	p[uid][ctr][res] = a
}

// inUse are the devices allocated to any container, by resource.
func (p podDevices) inUse() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, ctrs := range p {
		for _, res := range ctrs {
			for r, a := range res {
				if out[r] == nil {
					out[r] = map[string]bool{}
				}
				for _, id := range a.list() {
					out[r][id] = true
				}
			}
		}
	}
	return out
}

// Allocate allocates the device-plugin resources of every container of
// pod. active are the pods admitted before it and still running: the
// devices of any other pod are freed first (kubelet's
// UpdateAllocatedDevices); nil frees nothing (the node's pod sources are
// not all known yet, as after a start: kubelet frees nothing before its
// sources are ready). Its error is the refusal's cause.
func (m *Manager) Allocate(ctx context.Context, pod *v1.Pod, active []*v1.Pod) error {
	uid := string(pod.UID)
	keep := map[string]bool{uid: true}
	for _, p := range active {
		keep[string(p.UID)] = true
	}
	m.mu.Lock()
	freed := false
	for u := range m.pods {
		if active != nil && !keep[u] {
			delete(m.pods, u)
			freed = true
		}
	}
	if m.reuseUID != uid {
		m.reuseUID, m.reuse = uid, map[string]map[string]bool{}
	}
	m.mu.Unlock()
	if freed {
		m.writeCheckpoint()
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if err := m.allocateContainer(ctx, uid, c); err != nil {
			return err
		}
		if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			// A run-to-completion init container's devices serve the
			// containers after it.
			m.mu.Lock()
			for r, a := range m.pods[uid][c.Name] {
				if m.reuse[r] == nil {
					m.reuse[r] = map[string]bool{}
				}
				for _, id := range a.list() {
					m.reuse[r][id] = true
				}
			}
			m.mu.Unlock()
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if err := m.allocateContainer(ctx, uid, c); err != nil {
			return err
		}
		m.mu.Lock()
		for r, a := range m.pods[uid][c.Name] {
			for _, id := range a.list() {
				delete(m.reuse[r], id)
			}
		}
		m.mu.Unlock()
	}
	return nil
}

// Forget frees the devices of a pod (one refused after its allocation).
func (m *Manager) Forget(uid string) {
	m.mu.Lock()
	_, had := m.pods[uid]
	delete(m.pods, uid)
	m.mu.Unlock()
	if had {
		m.writeCheckpoint()
	}
}

// isDeviceResource: a plugin registered r, or devices of r are allocated.
func (m *Manager) isDeviceResource(r string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.healthy[r]; ok {
		return true
	}
	_, ok := m.pods.inUse()[r]
	return ok
}

// allocateContainer allocates c's device resources in name order.
func (m *Manager) allocateContainer(ctx context.Context, uid string, c *v1.Container) error {
	var names []string
	for name := range c.Resources.Limits {
		names = append(names, string(name))
	}
	sort.Strings(names)
	wrote := false
	for _, r := range names {
		q := c.Resources.Limits[v1.ResourceName(r)]
		if !m.isDeviceResource(r) {
			continue
		}
		devs, e, err := m.devicesToAllocate(ctx, uid, c.Name, r, int(q.Value()))
		if err != nil {
			return err
		}
		if len(devs) == 0 {
			continue
		}
		resp, err := e.allocate(ctx, devs)
		if err == nil && len(resp.ContainerResponses) == 0 {
			err = fmt.Errorf("no containers return in allocation response %v", resp)
		}
		if err != nil {
			m.mu.Lock()
			m.pend(r, devs, false)
			m.mu.Unlock()
			m.log.Error("device plugin Allocate failed", "resource", r, "pod", uid, "container", c.Name, "devices", devs, "err", err)
			return fmt.Errorf("device plugin %s: Allocate: %w", r, err)
		}
		m.mu.Lock()
		m.pods.put(uid, c.Name, r, &allocation{ids: m.byNUMA(r, devs), resp: resp.ContainerResponses[0]})
		m.pend(r, devs, false)
		m.mu.Unlock()
		wrote = true
	}
	if wrote {
		m.writeCheckpoint()
	}
	return nil
}

// byNUMA groups devs of r by their NUMA nodes (-1: none); m.mu is held.
func (m *Manager) byNUMA(r string, devs []string) checkpoint.DevicesPerNUMA {
	out := checkpoint.DevicesPerNUMA{}
	for _, id := range devs {
		d := m.devices[r][id]
		if d == nil || d.Topology == nil || len(d.Topology.Nodes) == 0 {
			out[-1] = append(out[-1], id)
			continue
		}
		for _, n := range d.Topology.Nodes {
			out[n.ID] = append(out[n.ID], id)
		}
	}
	return out
}

// devicesToAllocate picks needed devices of r for the container (kubelet's
// devicesToAllocate, without NUMA alignment): none when they were given
// before, else reused ones first, then the plugin's preferred, then in ID
// order. It returns the endpoint to ask.
func (m *Manager) devicesToAllocate(ctx context.Context, uid, ctr, r string, needed int) ([]string, *endpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.pods.get(uid, ctr, r)
	if a != nil {
		if have := len(a.list()); have != needed {
			return nil, nil, fmt.Errorf("pod %q container %q changed request for resource %q from %d to %d", uid, ctr, r, have, needed)
		}
	} else if needed == 0 {
		return nil, nil, nil
	}
	// Devices given before (the checkpoint's, for a pod admitted anew
	// after a node reboot) are checked as new ones: their plugin must be
	// registered and they healthy. kubelet skips the checks for a
	// container that still runs after its restart; speclet adopts such
	// pods without admitting them.
	healthy, registered := m.healthy[r]
	e := m.endpoints[r]
	if !registered || e == nil {
		return nil, nil, fmt.Errorf("cannot allocate unregistered device %s", r)
	}
	if len(healthy) == 0 {
		return nil, nil, fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", r)
	}
	if a != nil {
		for _, id := range a.list() {
			if !healthy[id] {
				return nil, nil, fmt.Errorf("previously allocated devices are no longer healthy; cannot allocate unhealthy devices %s", r)
			}
		}
		return nil, nil, nil
	}
	used := m.usedLocked(r)
	var picked []string
	for _, id := range sortedSet(m.reuse[r]) {
		if len(picked) < needed && healthy[id] {
			picked = append(picked, id)
		}
	}
	if len(picked) == needed {
		m.pend(r, picked, true)
		return picked, e, nil
	}
	var available []string
	for _, id := range sortedSet(healthy) {
		if !used[id] {
			available = append(available, id)
		}
	}
	if len(available) < needed-len(picked) {
		return nil, nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", r, needed-len(picked), len(available))
	}
	taken := map[string]bool{}
	for _, id := range picked {
		taken[id] = true
	}
	if e.opts.GetGetPreferredAllocationAvailable() {
		// The call goes out without the lock, as kubelet's.
		m.mu.Unlock()
		pref, err := e.preferred(ctx, append(append([]string{}, available...), picked...), picked, needed)
		m.mu.Lock()
		if err != nil {
			return nil, nil, fmt.Errorf("device plugin GetPreferredAllocation rpc failed with err: %v", err)
		}
		avail := map[string]bool{}
		for _, id := range available {
			avail[id] = true
		}
		for _, id := range pref {
			if len(picked) < needed && avail[id] && !taken[id] && !m.usedLocked(r)[id] {
				picked, taken[id] = append(picked, id), true
			}
		}
	}
	for _, id := range available {
		if len(picked) < needed && !taken[id] && !m.usedLocked(r)[id] {
			picked, taken[id] = append(picked, id), true
		}
	}
	if len(picked) < needed {
		return nil, nil, fmt.Errorf("unexpectedly allocated less resources than required. Requested: %d, Got: %d", needed, len(picked))
	}
	m.pend(r, picked, true)
	return picked, e, nil
}

// usedLocked are the devices of r allocated or being allocated; m.mu is
// held.
func (m *Manager) usedLocked(r string) map[string]bool {
	used := m.pods.inUse()[r]
	if used == nil {
		used = map[string]bool{}
	}
	for id := range m.pending[r] {
		used[id] = true
	}
	return used
}

// pend marks devs of r as being allocated (on) or no longer (off); m.mu is
// held.
func (m *Manager) pend(r string, devs []string, on bool) {
	if m.pending == nil {
		m.pending = map[string]map[string]bool{}
	}
	if m.pending[r] == nil {
		m.pending[r] = map[string]bool{}
	}
	for _, id := range devs {
		if on {
			m.pending[r][id] = true
		} else {
			delete(m.pending[r], id)
		}
	}
}

func sortedSet(s map[string]bool) []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
