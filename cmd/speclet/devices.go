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

// maxSocketPath is the longest path a unix socket's address holds
// (sockaddr_un's sun_path, less its terminating NUL).
const maxSocketPath = 107

// startDevices starts the device-plugin manager on --device-plugins-dir.
// As kubelet's, one that cannot make its directory or its registration
// socket stops the start: kubelet's container manager fails to start
// with it, and kubelet exits ("Failed to start ContainerManager",
// os.Exit(1)). The error names the socket's path.
func startDevices(o *runOptions, log *slog.Logger) (*devicemanager.Manager, error) {
	m := devicemanager.New(devicemanager.Config{Dir: o.devicePluginsDir, Log: log})
	path := m.SocketPath()
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("device-plugin registration socket %s: the path is %d bytes, a unix socket's longest is %d (give a shorter --device-plugins-dir)", path, len(path), maxSocketPath)
	}
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("device-plugin registration socket %s (--device-plugins-dir): %w", path, err)
	}
	return m, nil
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
