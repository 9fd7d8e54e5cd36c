package main

import (
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/devicemanager"
	"github.com/speclet/speclet/engine/podresources"
)

// kubeletDevicePluginsDir is where device plugins look for kubelet's
// registration socket (kubelet.sock) and put their own: a fixed path in
// kubelet, whatever its --root-dir, and in every device plugin.
const kubeletDevicePluginsDir = "/var/lib/kubelet/device-plugins"

// checkDevicePluginsDir checks --device-plugins-dir: kubelet's fixed
// directory by default, or, with the simulated runtime, <root-dir>/device-plugins;
// an absolute path other than /.
func (o *runOptions) checkDevicePluginsDir(fs *flag.FlagSet) error {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "device-plugins-dir" })
	if o.runtime == "sim" && !set {
		o.devicePluginsDir = filepath.Join(o.rootDir, "device-plugins")
	}
	if !filepath.IsAbs(o.devicePluginsDir) || filepath.Clean(o.devicePluginsDir) == "/" {
		return fmt.Errorf("--device-plugins-dir: %q: want an absolute directory other than /", o.devicePluginsDir)
	}
	o.devicePluginsDir = filepath.Clean(o.devicePluginsDir)
	return nil
}

// startDevices starts the device-plugin manager on --device-plugins-dir.
// One that cannot start is logged and the node runs without device
// plugins (nil): no pod is disturbed by it.
func startDevices(o *runOptions, log *slog.Logger) *devicemanager.Manager {
	m := devicemanager.New(devicemanager.Config{Dir: o.devicePluginsDir, Log: log})
	if err := m.Start(); err != nil {
		log.Error("device plugins off: the device-plugin manager cannot start", "dir", o.devicePluginsDir, "err", err)
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
