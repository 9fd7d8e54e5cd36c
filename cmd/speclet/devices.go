package main

import (
	"log/slog"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/devicemanager"
	"github.com/speclet/speclet/engine/podresources"
)

// devicePluginsDir is where device plugins register and put their sockets
// (kubelet's /var/lib/kubelet/device-plugins under its default root dir).
func devicePluginsDir(rootDir string) string { return filepath.Join(rootDir, "device-plugins") }

// startDevices starts the device-plugin manager on <root-dir>/device-plugins.
// One that cannot start is logged and the node runs without device
// plugins (nil): no pod is disturbed by it.
func startDevices(o *runOptions, log *slog.Logger) *devicemanager.Manager {
	m := devicemanager.New(devicemanager.Config{Dir: devicePluginsDir(o.rootDir), Log: log})
	if err := m.Start(); err != nil {
		log.Error("device plugins off: the device-plugin manager cannot start", "dir", devicePluginsDir(o.rootDir), "err", err)
		return nil
	}
	return m
}

// engineDevices is engine.Config.Devices: nil without a manager.
func (nd *nodeResources) engineDevices() engine.Devices {
	if nd.devices == nil {
		return nil
	}
	return nd.devices
}

// extended is node.Config.Extended: nil without a manager.
func (nd *nodeResources) extended() func() (v1.ResourceList, v1.ResourceList) {
	if nd.devices == nil {
		return nil
	}
	return nd.devices.Capacity
}

// podResourcesDevices is the pod-resources API's devices: nil without a
// manager.
func (nd *nodeResources) podResourcesDevices() podresources.Devices {
	if nd.devices == nil {
		return nil
	}
	return nd.devices
}
