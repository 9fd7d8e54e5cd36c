package podspec

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DeviceRun is what the device plugins give a container (kubelet's
// DeviceRunContainerOptions): host devices, mounts, environment variables,
// annotations and CDI devices, from the plugins' Allocate responses.
type DeviceRun struct {
	Devices     []*runtimeapi.Device
	Mounts      []*runtimeapi.Mount
	Envs        []*runtimeapi.KeyValue
	Annotations map[string]string
	CDIDevices  []*runtimeapi.CDIDevice
}

// withDevices merges d into cfg as kubelet's GenerateRunContainerOptions
// does: the plugins' environment variables and mounts before the
// container's own, their devices and CDI devices, and their annotations
// beside speclet's (speclet's win a clash).
func withDevices(cfg *runtimeapi.ContainerConfig, d *DeviceRun) {
	if d == nil {
		return
	}
	cfg.Envs = append(append([]*runtimeapi.KeyValue{}, d.Envs...), cfg.Envs...)
	cfg.Mounts = append(append([]*runtimeapi.Mount{}, d.Mounts...), cfg.Mounts...)
	cfg.Devices = append(cfg.Devices, d.Devices...)
	cfg.CDIDevices = append(cfg.CDIDevices, d.CDIDevices...)
	if len(d.Annotations) > 0 {
		ann := make(map[string]string, len(d.Annotations)+len(cfg.Annotations))
		for k, v := range d.Annotations {
			ann[k] = v
		}
		for k, v := range cfg.Annotations {
			ann[k] = v
		}
		cfg.Annotations = ann
	}
}
