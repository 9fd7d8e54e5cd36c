package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	// NodeIP is the InternalIP the node gets (default 127.0.0.1); the
	// kubelet API listens where Config's "address" says.
	NodeIP string
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
// node address and every port on 127.0.0.1, the kubelet API authenticating
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
	// kubelet refuses a loopback --node-ip ("nodeIP can't be loopback
	// address") and then reports no address at all, so that the API server
	// cannot reach it for logs, exec or port-forward. As with an external
	// cloud provider, kubelet leaves the addresses to someone else:
	// initNode sets InternalIP (NodeIP) and lifts the uninitialized taint.
	args := append([]string{"--config", cfgPath, "--kubeconfig", kc, "--hostname-override", o.Name, "--cloud-provider", "external",
		"--root-dir", filepath.Join(o.Dir, "root"), "--cert-dir", filepath.Join(o.Dir, "pki"), "--v", "1"}, o.Args...)
	k.cmd = exec.Command(o.Bin, args...)
	k.cmd.Stdout, k.cmd.Stderr = logf, logf
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start kubelet %s: %w", o.Name, err)
	}
	go func() { k.cmd.Wait(); logf.Close(); close(k.exited) }()
	nodeIP := o.NodeIP
	if nodeIP == "" {
		nodeIP = "127.0.0.1"
	}
	go k.initNode(c, nodeIP)
	return k, nil
}

// uninitializedTaint is the taint kubelet registers with under
// --cloud-provider external.
const uninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// initNode does for node k.Name what a cloud provider's node controller
// would: once the node is registered, it sets its addresses (InternalIP
// nodeIP, Hostname) and removes the uninitialized taint. It gives up
// when the kubelet exits; errors land in the kubelet's log.
func (k *Kubelet) initNode(c *Cluster, nodeIP string) {
	cs, err := c.AdminClient()
	if err != nil {
		k.note("init node: %v", err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-k.exited; cancel() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		n, err := cs.CoreV1().Nodes().Get(ctx, k.Name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		if !hasInternalIP(n) {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}, {Type: corev1.NodeHostName, Address: k.Name}}
			if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				continue // conflict with the kubelet's own update: again
			}
			continue
		}
		var taints []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != uninitializedTaint {
				taints = append(taints, t)
			}
		}
		if len(taints) == len(n.Spec.Taints) {
			return
		}
		n.Spec.Taints = taints
		cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	}
}

func hasInternalIP(n *corev1.Node) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return true
		}
	}
	return false
}

func (k *Kubelet) note(format string, a ...any) {
	if f, err := os.OpenFile(k.LogPath, os.O_WRONLY|os.O_APPEND, 0); err == nil {
		fmt.Fprintf(f, "cluster: "+format+"\n", a...)
		f.Close()
	}
}

// LogTail returns the last n lines of the kubelet's log.
func (k *Kubelet) LogTail(n int) string { return TailFile(k.LogPath, n) }

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
