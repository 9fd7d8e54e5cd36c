package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// layout names every path of one harness instance under its Dir.
type layout struct {
	dir string
}

func (l layout) config() string   { return filepath.Join(l.dir, "config.toml") }
func (l layout) root() string     { return filepath.Join(l.dir, "root") }
func (l layout) state() string    { return filepath.Join(l.dir, "state") }
func (l layout) socket() string   { return filepath.Join(l.dir, "c.sock") }
func (l layout) ttrpc() string    { return filepath.Join(l.dir, "c.sock.ttrpc") }
func (l layout) log() string      { return filepath.Join(l.dir, "containerd.log") }
func (l layout) temp() string     { return filepath.Join(l.dir, "tmp") }
func (l layout) opt() string      { return filepath.Join(l.dir, "opt") }
func (l layout) runcRoot() string { return filepath.Join(l.dir, "runc") }
func (l layout) cniConf() string  { return filepath.Join(l.dir, "cni", "net.d") }
func (l layout) cniIPAM() string  { return filepath.Join(l.dir, "cni", "ipam") }
func (l layout) certsD() string   { return filepath.Join(l.dir, "certs.d") }
func (l layout) bridgeFile() string {
	return filepath.Join(l.dir, "bridge")
}
func (l layout) ownerFile() string { return filepath.Join(l.dir, "owner.pid") }

// taskDir holds one directory per sandbox and container (named by id) while
// its shim lives.
func (l layout) taskDir() string {
	return filepath.Join(l.state(), "io.containerd.runtime.v2.task", criNamespace)
}

// criNamespace is the containerd namespace the CRI plugin uses.
const criNamespace = "k8s.io"

// maxSocketPath keeps the socket path under the unix socket limit (108 bytes
// with the terminating NUL) with room for containerd's ".ttrpc" suffix.
const maxSocketPath = 100

// writeConfig writes the config of runtime rt running bins, the CNI bridge
// config and the registry hosts file for one instance.
func writeConfig(l layout, rt Runtime, bins binaries, registryAddr, bridge, subnet string) error {
	if n := len(l.socket()); n > maxSocketPath {
		return fmt.Errorf("write containerd config: socket path %s is %d bytes, more than %d; use a shorter Dir", l.socket(), n, maxSocketPath)
	}
	for _, d := range []string{l.root(), l.state(), l.temp(), l.opt(), l.runcRoot(), l.cniConf(), l.cniIPAM(), filepath.Join(l.certsD(), registryAddr)} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("write containerd config: %w", err)
		}
	}
	cfg := configV2(l, registryAddr)
	if rt == Containerd2 {
		cfg = configV3(l, bins, registryAddr)
	}
	if err := os.WriteFile(l.config(), []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("write containerd config: %w", err)
	}

	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+registryAddr, "http://"+registryAddr)
	if err := os.WriteFile(filepath.Join(l.certsD(), registryAddr, "hosts.toml"), []byte(hosts), 0o644); err != nil {
		return fmt.Errorf("write registry hosts: %w", err)
	}

	cni := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "speclet-" + bridge,
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      bridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": false,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": l.cniIPAM(),
					"ranges":  [][]map[string]string{{{"subnet": subnet}}},
				},
			},
		},
	}
	b, err := json.MarshalIndent(cni, "", "  ")
	if err != nil {
		return fmt.Errorf("write CNI config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(l.cniConf(), "10-speclet.conflist"), b, 0o644); err != nil {
		return fmt.Errorf("write CNI config: %w", err)
	}
	if err := os.WriteFile(l.bridgeFile(), []byte(bridge), 0o644); err != nil {
		return fmt.Errorf("write CNI config: %w", err)
	}
	return nil
}

// configV2 is containerd 1.6's config (version 2) for instance l.
func configV2(l layout, registryAddr string) string {
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	return strings.Join([]string{
		`version = 2`,
		`root = ` + q(l.root()),
		`state = ` + q(l.state()),
		`temp = ` + q(l.temp()),
		`oom_score = 0`,
		`required_plugins = ["io.containerd.grpc.v1.cri"]`,
		`disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]`,
		``,
		`[grpc]`,
		`  address = ` + q(l.socket()),
		`  tcp_address = ""`,
		`[ttrpc]`,
		`  address = ` + q(l.ttrpc()),
		`[debug]`,
		`  address = ""`,
		`[metrics]`,
		`  address = ""`,
		``,
		`[plugins."io.containerd.internal.v1.opt"]`,
		`  path = ` + q(l.opt()),
		`[plugins."io.containerd.grpc.v1.cri"]`,
		`  sandbox_image = ` + q(registryAddr+"/"+PauseRepo),
		// The machine forbids lowering oom_score_adj; without this every
		// sandbox fails with "can't get final child's PID from pipe".
		`  restrict_oom_score_adj = true`,
		`  netns_mounts_under_state_dir = true`,
		`  disable_apparmor = true`,
		`  disable_tcp_service = true`,
		`  stream_server_address = "127.0.0.1"`,
		`  stream_server_port = "0"`,
		`  enable_tls_streaming = false`,
		`  [plugins."io.containerd.grpc.v1.cri".containerd]`,
		`    snapshotter = "overlayfs"`,
		`    default_runtime_name = "runc"`,
		`    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]`,
		`      runtime_type = "io.containerd.runc.v2"`,
		`      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]`,
		`        Root = ` + q(l.runcRoot()),
		`        SystemdCgroup = false`,
		`  [plugins."io.containerd.grpc.v1.cri".cni]`,
		`    bin_dir = ` + q(CNIBinDir),
		`    conf_dir = ` + q(l.cniConf()),
		`    max_conf_num = 1`,
		`  [plugins."io.containerd.grpc.v1.cri".registry]`,
		`    config_path = ` + q(l.certsD()),
		``,
	}, "\n")
}

// configV3 is containerd 2.x's config (version 3) for instance l running
// bins: the same settings as configV2 under the plugins they moved to
// (io.containerd.cri.v1.images: snapshotter, sandbox image, registry;
// io.containerd.cri.v1.runtime: runtimes, CNI, OOM score, netns, AppArmor;
// io.containerd.grpc.v1.cri: the streaming server), the shim and runc of
// bins by path (Debian's 1.6 shim and runc are on PATH), and NRI off (its
// socket is machine-wide, /var/run/nri). Settings left out keep 2.x's
// defaults, as on a node.
func configV3(l layout, bins binaries, registryAddr string) string {
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	return strings.Join([]string{
		`version = 3`,
		`root = ` + q(l.root()),
		`state = ` + q(l.state()),
		`temp = ` + q(l.temp()),
		`oom_score = 0`,
		`required_plugins = ["io.containerd.grpc.v1.cri"]`,
		`disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs", "io.containerd.differ.v1.erofs"]`,
		``,
		`[grpc]`,
		`  address = ` + q(l.socket()),
		`  tcp_address = ""`,
		`[ttrpc]`,
		`  address = ` + q(l.ttrpc()),
		`[debug]`,
		`  address = ""`,
		`[metrics]`,
		`  address = ""`,
		``,
		`[plugins."io.containerd.internal.v1.opt"]`,
		`  path = ` + q(l.opt()),
		`[plugins."io.containerd.cri.v1.images"]`,
		`  snapshotter = "overlayfs"`,
		`  [plugins."io.containerd.cri.v1.images".pinned_images]`,
		`    sandbox = ` + q(registryAddr+"/"+PauseRepo),
		`  [plugins."io.containerd.cri.v1.images".registry]`,
		`    config_path = ` + q(l.certsD()),
		`[plugins."io.containerd.cri.v1.runtime"]`,
		// As in configV2: the machine forbids lowering oom_score_adj.
		`  restrict_oom_score_adj = true`,
		`  netns_mounts_under_state_dir = true`,
		`  disable_apparmor = true`,
		`  [plugins."io.containerd.cri.v1.runtime".containerd]`,
		`    default_runtime_name = "runc"`,
		`    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]`,
		`      runtime_type = "io.containerd.runc.v2"`,
		`      runtime_path = ` + q(bins.shim),
		`      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]`,
		`        BinaryName = ` + q(bins.runc),
		`        Root = ` + q(l.runcRoot()),
		`        SystemdCgroup = false`,
		`  [plugins."io.containerd.cri.v1.runtime".cni]`,
		`    bin_dirs = [` + q(CNIBinDir) + `]`,
		`    conf_dir = ` + q(l.cniConf()),
		`    max_conf_num = 1`,
		`[plugins."io.containerd.grpc.v1.cri"]`,
		`  disable_tcp_service = true`,
		`  stream_server_address = "127.0.0.1"`,
		`  stream_server_port = "0"`,
		`  enable_tls_streaming = false`,
		``,
	}, "\n")
}
