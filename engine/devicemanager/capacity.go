package devicemanager

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Capacity is what the device plugins give the Node's status (kubelet's
// GetCapacity): per resource, every device in capacity and the healthy
// ones in allocatable; a resource whose plugin is gone keeps its capacity
// (allocatable 0) until EndpointGracePeriod has passed, then is removed,
// and reported 0 in both.
func (m *Manager) Capacity() (capacity, allocatable v1.ResourceList) {
	m.expire()
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	m.mu.Lock()
	for r := range m.resourcesLocked() {
		h, u := len(m.healthy[r]), len(m.unhealthy[r])
		capacity[v1.ResourceName(r)] = *resource.NewQuantity(int64(h+u), resource.DecimalSI)
		allocatable[v1.ResourceName(r)] = *resource.NewQuantity(int64(h), resource.DecimalSI)
	}
	for r := range m.removed {
		capacity[v1.ResourceName(r)] = *resource.NewQuantity(0, resource.DecimalSI)
		allocatable[v1.ResourceName(r)] = *resource.NewQuantity(0, resource.DecimalSI)
	}
	m.mu.Unlock()
	return capacity, allocatable
}

// expire fires the timers of the plugin machines that ran out (gone's
// grace_over: remove_resource), as kubelet's GetCapacity finds the
// endpoints whose grace expired when the node status reads it.
func (m *Manager) expire() {
	now := m.cfg.Now()
	m.fmu.Lock()
	defer m.fmu.Unlock()
	for _, r := range sortedKeysOf(m.plugins) {
		m.plugins[r].due(now)
	}
}

// resourcesLocked are the resources known (registered now, or from the
// checkpoint and not yet past their grace); m.mu is held.
func (m *Manager) resourcesLocked() map[string]bool {
	out := map[string]bool{}
	for r := range m.healthy {
		out[r] = true
	}
	for r := range m.unhealthy {
		out[r] = true
	}
	return out
}

// Resources are the resource names of the device plugins known, sorted.
func (m *Manager) Resources() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for r := range m.resourcesLocked() {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}
