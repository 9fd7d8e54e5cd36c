package devicemanager

import (
	"errors"
	"sort"

	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/speclet/speclet/engine/devicemanager/checkpoint"
	"github.com/speclet/speclet/fsm"
)

// writeCheckpoint writes the allocations and the healthy devices of each
// resource (kubelet's writeCheckpoint); a failure is logged, the node goes
// on.
func (m *Manager) writeCheckpoint() {
	m.mu.Lock()
	registered := map[string][]string{}
	for r, devs := range m.healthy {
		registered[r] = sortedSet(devs)
	}
	var entries []checkpoint.PodDevicesEntry
	for _, uid := range sortedKeysOf(m.pods) {
		for _, ctr := range sortedKeysOf(m.pods[uid]) {
			for _, r := range sortedKeysOf(m.pods[uid][ctr]) {
				a := m.pods[uid][ctr][r]
				resp, err := proto.Marshal(a.resp)
				if err != nil {
					m.log.Error("encode device allocation", "pod", uid, "container", ctr, "resource", r, "err", err)
					continue
				}
				entries = append(entries, checkpoint.PodDevicesEntry{PodUID: uid, ContainerName: ctr, ResourceName: r, DeviceIDs: a.ids, AllocResp: resp})
			}
		}
	}
	m.mu.Unlock()
	if err := checkpoint.Write(m.cfg.Dir, checkpoint.New(entries, registered)); err != nil {
		m.log.Error("write device checkpoint", "err", err)
	}
}

// readCheckpoint restores the allocations of the checkpoint and, for each
// resource registered then, a stopped endpoint and its machine in gone
// (spec/device_plugin.hcl's restored family): its capacity stays (0
// devices) until its plugin registers again or its grace ends.
func (m *Manager) readCheckpoint() error {
	d, err := checkpoint.Read(m.cfg.Dir)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	m.mu.Lock()
	now := m.cfg.Now()
	for _, e := range d.Entries() {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, resp); err != nil {
			m.log.Error("device checkpoint: an allocation cannot be decoded", "pod", e.PodUID, "container", e.ContainerName, "resource", e.ResourceName, "err", err)
			continue
		}
		m.pods.put(e.PodUID, e.ContainerName, e.ResourceName, &allocation{ids: e.DeviceIDs, resp: resp})
	}
	var restored []string
	for r := range d.Registered() {
		m.healthy[r], m.unhealthy[r] = map[string]bool{}, map[string]bool{}
		m.endpoints[r] = stoppedEndpoint(r, now)
		restored = append(restored, r)
	}
	m.mu.Unlock()
	sort.Strings(restored)
	m.fmu.Lock()
	for _, r := range restored {
		m.newPlugin(r, fsm.DevicePluginStateGone)
	}
	m.fmu.Unlock()
	m.log.Info("device checkpoint read", "allocations", len(d.Entries()), "resources", len(d.Registered()))
	return nil
}

func sortedKeysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ContainerDevices are the devices allocated to a container of a pod, by
// resource (the pod-resources API's List and Get): as kubelet gives them,
// one entry per device and NUMA node, without topology for a device that
// has none.
func (m *Manager) ContainerDevices(podUID, containerName string) []*podresourcesv1.ContainerDevices {
	m.mu.Lock()
	defer m.mu.Unlock()
	res := m.pods[podUID][containerName]
	var out []*podresourcesv1.ContainerDevices
	for _, r := range sortedKeysOf(res) {
		out = append(out, entries(r, res[r].ids)...)
	}
	return out
}

// AllocatableDevices are the healthy devices, by resource (the
// pod-resources API's GetAllocatableResources), entries as
// ContainerDevices'.
func (m *Manager) AllocatableDevices() []*podresourcesv1.ContainerDevices {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*podresourcesv1.ContainerDevices
	for _, r := range sortedKeysOf(m.healthy) {
		var ids []string
		for id := range m.healthy[r] {
			ids = append(ids, id)
		}
		out = append(out, entries(r, m.byNUMA(r, ids))...)
	}
	return out
}

// entries are the pod-resources entries of devices by NUMA node.
func entries(r string, ids checkpoint.DevicesPerNUMA) []*podresourcesv1.ContainerDevices {
	var nodes []int64
	for n := range ids {
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
	var out []*podresourcesv1.ContainerDevices
	for _, n := range nodes {
		devs := append([]string{}, ids[n]...)
		sort.Strings(devs)
		for _, id := range devs {
			d := &podresourcesv1.ContainerDevices{ResourceName: r, DeviceIds: []string{id}}
			if n >= 0 {
				d.Topology = &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: n}}}
			}
			out = append(out, d)
		}
	}
	return out
}
