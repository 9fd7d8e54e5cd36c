package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/speclet/speclet/cri/harness"
)

// KubeletOptions configure an upstream kubelet node.
type KubeletOptions struct {
	Name string
	// Bin is the kubelet binary (test/kubebuild, set "kubelet").
	Bin string
	// Containerd is the node's own runtime; the node does not stop it.
	Containerd *harness.Containerd
	// Dir holds the node's config, root dir, certificates and log.
	Dir string
	// Config overrides or adds KubeletConfiguration fields.
	Config map[string]any
	// Args are extra kubelet flags.
	Args []string
}

// Kubelet is an upstream kubelet joined to the cluster as node Name with its
// own node credentials (system:node:<Name>), on 127.0.0.1.
type Kubelet struct {
	Name    string
	LogPath string

	cmd    *exec.Cmd
	exited chan struct{}
	dir    string
}

// StartKubelet runs kubelet o.Bin as node o.Name on o.Containerd: no QoS
// cgroups, no eviction or image GC worth the name (the machine is shared),
// node IP and every port on 127.0.0.1, the kubelet API authenticating
// clients by the cluster CA (the API server's kubelet client certificate)
// and authorizing everything. It returns once the process runs; the node
// registers itself shortly after.
func (c *Cluster) StartKubelet(o KubeletOptions) (*Kubelet, error) {
	kc, err := c.NodeKubeconfig(o.Name)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("start kubelet %s: %w", o.Name, err)
	}
	ports := make([]int, 2)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	cfg := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"cgroupDriver":             "cgroupfs",
		"failSwapOn":               false,
		"cgroupsPerQOS":            false,
		"enforceNodeAllocatable":   []string{},
		"containerRuntimeEndpoint": o.Containerd.Endpoint,
		"imageServiceEndpoint":     o.Containerd.Endpoint,
		"address":                  "127.0.0.1",
		"port":                     ports[0],
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              ports[1],
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": false},
			"x509":      map[string]any{"clientCAFile": c.caCrt},
		},
		"authorization":               map[string]any{"mode": "AlwaysAllow"},
		"podLogsDir":                  filepath.Join(o.Dir, "pod-logs"),
		"resolvConf":                  "/etc/resolv.conf",
		"registerNode":                true,
		"makeIPTablesUtilChains":      false,
		"evictionHard":                map[string]string{"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"kubeAPIQPS":                  50,
		"kubeAPIBurst":                100,
	}
	for k, v := range o.Config {
		cfg[k] = v
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(o.Dir, "kubelet-config.json")
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		return nil, err
	}
	k := &Kubelet{Name: o.Name, LogPath: filepath.Join(o.Dir, "kubelet.log"), dir: o.Dir, exited: make(chan struct{})}
	logf, err := os.Create(k.LogPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--config", cfgPath, "--kubeconfig", kc, "--hostname-override", o.Name, "--node-ip", "127.0.0.1",
		"--root-dir", filepath.Join(o.Dir, "root"), "--cert-dir", filepath.Join(o.Dir, "pki"), "--v", "1"}, o.Args...)
	k.cmd = exec.Command(o.Bin, args...)
	k.cmd.Stdout, k.cmd.Stderr = logf, logf
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start kubelet %s: %w", o.Name, err)
	}
	go func() { k.cmd.Wait(); logf.Close(); close(k.exited) }()
	return k, nil
}

// LogTail returns the last n lines of the kubelet's log.
func (k *Kubelet) LogTail(n int) string {
	b, _ := os.ReadFile(k.LogPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Exited reports whether the kubelet process has ended.
func (k *Kubelet) Exited() bool {
	select {
	case <-k.exited:
		return true
	default:
		return false
	}
}

// Stop ends kubelet (SIGTERM, SIGKILL after 30 s) and detaches the mounts
// it left under its directory (its root dir is bind-mounted onto itself,
// and pod volumes are mounted below it). It is idempotent.
func (k *Kubelet) Stop() {
	k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.exited:
	case <-time.After(30 * time.Second):
		k.cmd.Process.Kill()
		<-k.exited
	}
	mounts := harness.Mounts(k.dir)
	for i := len(mounts) - 1; i >= 0; i-- {
		syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}
