package devicemanager

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/podspec"
)

// RunOptions are what the device plugins give c at its creation (kubelet's
// GetDeviceRunContainerOptions): PreStartContainer first for a plugin that
// asks for it, a new allocation when none is known (a restart without its
// checkpoint), then the Allocate responses merged: environment variables,
// mounts and devices by container path and annotations by key, the first
// resource (in name order) winning, and every CDI device once. nil: c has
// no device resources.
func (m *Manager) RunOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*podspec.DeviceRun, error) {
	uid := string(pod.UID)
	var names []string
	for name, q := range c.Resources.Limits {
		if q.Value() > 0 && m.isDeviceResource(string(name)) {
			names = append(names, string(name))
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	sort.Strings(names)
	m.mu.Lock()
	missing := false
	for _, r := range names {
		missing = missing || m.pods.get(uid, c.Name, r) == nil
	}
	m.mu.Unlock()
	if missing {
		if err := m.allocateContainer(ctx, uid, c); err != nil {
			return nil, fmt.Errorf("allocate devices: %w", err)
		}
	}
	run := &podspec.DeviceRun{}
	envs, mounts, devs, cdi := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range names {
		m.mu.Lock()
		a, e := m.pods.get(uid, c.Name, r), m.endpoints[r]
		m.mu.Unlock()
		if a == nil {
			return nil, fmt.Errorf("no devices found allocated in local cache for pod %s, container %s, resource %s", uid, c.Name, r)
		}
		if e == nil {
			return nil, fmt.Errorf("endpoint not found in cache for a registered resource: %s", r)
		}
		if e.opts.GetPreStartRequired() {
			if err := e.preStart(ctx, a.list()); err != nil {
				return nil, fmt.Errorf("device plugin PreStartContainer rpc failed with err: %v", err)
			}
		}
		resp := a.resp
		for _, k := range sortedKeys(resp.Envs) {
			if !envs[k] {
				envs[k] = true
				run.Envs = append(run.Envs, &runtimeapi.KeyValue{Key: k, Value: []byte(resp.Envs[k])})
			}
		}
		for _, d := range resp.Devices {
			if !devs[d.ContainerPath] {
				devs[d.ContainerPath] = true
				run.Devices = append(run.Devices, &runtimeapi.Device{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions})
			}
		}
		for _, mt := range resp.Mounts {
			if !mounts[mt.ContainerPath] {
				mounts[mt.ContainerPath] = true
				run.Mounts = append(run.Mounts, &runtimeapi.Mount{ContainerPath: mt.ContainerPath, HostPath: mt.HostPath, Readonly: mt.ReadOnly})
			}
		}
		for _, k := range sortedKeys(resp.Annotations) {
			if run.Annotations == nil {
				run.Annotations = map[string]string{}
			}
			if _, ok := run.Annotations[k]; !ok {
				run.Annotations[k] = resp.Annotations[k]
			}
		}
		for _, d := range resp.CdiDevices {
			if d != nil && !cdi[d.Name] {
				cdi[d.Name] = true
				run.CDIDevices = append(run.CDIDevices, &runtimeapi.CDIDevice{Name: d.Name})
			}
		}
	}
	return run, nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
