package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/speclet/speclet/engine/cgroups"
	"github.com/speclet/speclet/engine/devicemanager"
	"github.com/speclet/speclet/engine/eviction"
	"github.com/speclet/speclet/engine/nodestats"
	"github.com/speclet/speclet/engine/resources"
)

// nodeOptions are the flags of the node's resources: the QoS cgroup
// hierarchy and node allocatable (kubelet's names and defaults).
type nodeOptions struct {
	cgroupsPerQOS   bool
	cgroupRoot      string // where the cgroup filesystems are mounted
	cgroupParent    string // --cgroup-root: the cgroup kubepods is made in
	kubeletCgroups  string // the cgroup speclet moves itself into
	runtimeCgroups  string // the runtime's cgroup, for its stats
	systemCgroups   string // the cgroup the root's other processes are moved into
	kubeReserved    string
	systemReserved  string
	enforce         string
	evictionHard    string
	evictionSoft    string
	evictionGrace   string
	evictionReclaim string
	evictionTrans   time.Duration
	evictionMaxPodG int64
	evictionSoftT   []resources.Threshold
	evictionGraceM  map[string]time.Duration
	evictionMinRecl map[string]resource.Quantity
	kubeReservedL   v1.ResourceList
	systemReservedL v1.ResourceList
	evictionHardT   []resources.Threshold
	enforcePods     bool
}

func (n *nodeOptions) flags(fs *flag.FlagSet) {
	fs.BoolVar(&n.cgroupsPerQOS, "cgroups-per-qos", true, "create the kubepods, kubepods/burstable and kubepods/besteffort cgroups and a cgroup per pod under them (cgroupfs driver, cgroup v1 or v2); ignored with --runtime=sim")
	fs.StringVar(&n.cgroupRoot, "cgroup-fs-root", "/sys/fs/cgroup", "where the cgroup filesystems are mounted")
	fs.StringVar(&n.cgroupParent, "cgroup-root", "", "the cgroup the kubepods hierarchy is made in, e.g. /node-a (kubepods is then /node-a/kubepods); default the root")
	fs.StringVar(&n.kubeletCgroups, "kubelet-cgroups", "", "the cgroup the node agent moves itself into at start, e.g. /kubelet (reported as system container \"kubelet\" in /stats/summary); default: it stays where it was started")
	fs.StringVar(&n.runtimeCgroups, "runtime-cgroups", "", "the container runtime's cgroup, e.g. /runtime, whose stats /stats/summary reports as system container \"runtime\" (the runtime is not moved)")
	fs.StringVar(&n.systemCgroups, "system-cgroups", "", "the cgroup every other process of the root cgroup (of the devices hierarchy on cgroup v1) is moved into at start, in every hierarchy, e.g. /system (system container \"misc\" in /stats/summary); kernel threads and pid 1 stay; needs --cgroups-per-qos")
	fs.StringVar(&n.kubeReserved, "kube-reserved", "", "resources reserved for the node agent and the runtime, e.g. cpu=200m,memory=500Mi; taken from node allocatable")
	fs.StringVar(&n.systemReserved, "system-reserved", "", "resources reserved for the system, e.g. cpu=200m,memory=500Mi; taken from node allocatable")
	fs.StringVar(&n.enforce, "enforce-node-allocatable", "pods", "where node allocatable is enforced: pods (the kubepods cgroup's limits), or none")
	fs.StringVar(&n.evictionHard, "eviction-hard", resources.DefaultEvictionHard, "hard eviction thresholds (signal<quantity or signal<percent%): a pod is evicted at once (grace 1 s) when one is met; the memory.available threshold is also taken from node allocatable")
	fs.StringVar(&n.evictionSoft, "eviction-soft", "", "soft eviction thresholds (signal<quantity or signal<percent%): met for their grace period, a pod is evicted with --eviction-max-pod-grace-period")
	fs.StringVar(&n.evictionGrace, "eviction-soft-grace-period", "", "grace period of each soft threshold, e.g. memory.available=1m30s (every --eviction-soft signal needs one)")
	fs.StringVar(&n.evictionReclaim, "eviction-minimum-reclaim", "", "once a threshold is met it stays met until this much more is available, e.g. memory.available=100Mi,nodefs.available=500Mi")
	fs.DurationVar(&n.evictionTrans, "eviction-pressure-transition-period", 5*time.Minute, "how long a pressure condition stays True after its last breach")
	fs.Int64Var(&n.evictionMaxPodG, "eviction-max-pod-grace-period", 0, "grace period (seconds) of a pod evicted for a soft threshold, at most the pod's own; negative: the pod's own")
}

func (n *nodeOptions) check() error {
	var err error
	if n.kubeReservedL, err = resources.ParseList("kube-reserved", n.kubeReserved); err != nil {
		return err
	}
	if n.systemReservedL, err = resources.ParseList("system-reserved", n.systemReserved); err != nil {
		return err
	}
	if n.evictionHardT, err = resources.ParseThresholds("eviction-hard", n.evictionHard); err != nil {
		return err
	}
	if n.evictionSoftT, err = resources.ParseThresholds("eviction-soft", n.evictionSoft); err != nil {
		return err
	}
	if n.evictionGraceM, err = eviction.ParseGrace("eviction-soft-grace-period", n.evictionGrace); err != nil {
		return err
	}
	for _, t := range n.evictionSoftT {
		if _, ok := n.evictionGraceM[t.Signal]; !ok {
			return fmt.Errorf("--eviction-soft: %s has no grace period in --eviction-soft-grace-period", t.Signal)
		}
	}
	if n.evictionMinRecl, err = parseMinReclaim(n.evictionReclaim); err != nil {
		return err
	}
	if n.evictionTrans < 0 {
		return fmt.Errorf("--eviction-pressure-transition-period: %s: want 0 or more", n.evictionTrans)
	}
	for _, v := range strings.Split(n.enforce, ",") {
		switch strings.TrimSpace(v) {
		case "pods":
			n.enforcePods = true
		case "none", "":
		case "system-reserved", "kube-reserved":
			return fmt.Errorf("--enforce-node-allocatable: %q: only pods and none are supported (speclet creates no system or kube cgroups)", v)
		default:
			return fmt.Errorf("--enforce-node-allocatable: %q: want pods or none", v)
		}
	}
	if p := n.cgroupParent; p != "" && (!strings.HasPrefix(p, "/") || path.Clean(p) != p) {
		return fmt.Errorf("--cgroup-root: %q: want an absolute cgroup path such as /node-a", p)
	}
	for _, f := range []struct{ name, val string }{{"kubelet-cgroups", n.kubeletCgroups}, {"runtime-cgroups", n.runtimeCgroups}, {"system-cgroups", n.systemCgroups}} {
		if p := f.val; p != "" && (!strings.HasPrefix(p, "/") || path.Clean(p) != p) {
			return fmt.Errorf("--%s: %q: want an absolute cgroup path such as /system", f.name, p)
		}
		if f.val != "" && f.name != "runtime-cgroups" && !n.cgroupsPerQOS {
			return fmt.Errorf("--%s needs --cgroups-per-qos (speclet's cgroup manager)", f.name)
		}
	}
	if n.systemCgroups == "/" {
		return fmt.Errorf("--system-cgroups: the system cgroup cannot be the root (\"/\")")
	}
	if n.enforcePods && !n.cgroupsPerQOS {
		return fmt.Errorf("--enforce-node-allocatable=pods needs --cgroups-per-qos (set --enforce-node-allocatable=none)")
	}
	return nil
}

// systemContainers are the Summary API's system containers of the flags
// (kubeletapi.Config.SystemCgroups).
func (n *nodeOptions) systemContainers() map[string]string {
	out := map[string]string{}
	for name, rel := range map[string]string{statsapi.SystemContainerKubelet: n.kubeletCgroups,
		statsapi.SystemContainerRuntime: n.runtimeCgroups, statsapi.SystemContainerMisc: n.systemCgroups} {
		if rel != "" {
			out[name] = rel
		}
	}
	return out
}

// parseMinReclaim parses --eviction-minimum-reclaim
// "memory.available=100Mi,nodefs.available=500Mi" (quantities only).
func parseMinReclaim(s string) (map[string]resource.Quantity, error) {
	out := map[string]resource.Quantity{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if _, known := resources.Signals[k]; !ok || !known {
			return nil, fmt.Errorf("--eviction-minimum-reclaim: %q: want signal=quantity with a known signal (memory.available, nodefs.available, ...)", kv)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() < 0 {
			return nil, fmt.Errorf("--eviction-minimum-reclaim: %q: want a non-negative quantity such as 500Mi (percentages are not supported)", kv)
		}
		out[k] = q
	}
	return out, nil
}

// evictionManager is the eviction manager of the flags. With node
// allocatable enforced on pods, every hard memory.available threshold
// (and its minimum reclaim) also applies to allocatableMemory.available,
// as in kubelet.
func (n *nodeOptions) evictionManager() *eviction.Manager {
	hard, reclaim := n.evictionHardT, n.evictionMinRecl
	if n.enforcePods {
		hard = eviction.WithAllocatableMemory(hard)
		if q, ok := reclaim["memory.available"]; ok {
			if _, set := reclaim[eviction.AllocatableMemory]; !set {
				reclaim = maps.Clone(reclaim)
				reclaim[eviction.AllocatableMemory] = q
			}
		}
	}
	return eviction.NewManager(eviction.Config{Hard: hard, Soft: n.evictionSoftT, Grace: n.evictionGraceM,
		MinReclaim: reclaim, Transition: n.evictionTrans})
}

// allocatable is node allocatable on a node of capacity: capacity minus
// --kube-reserved, --system-reserved and the --eviction-hard thresholds
// (memory.available from memory, nodefs.available from ephemeral-storage).
func (n *nodeOptions) allocatable(capacity v1.ResourceList) v1.ResourceList {
	return resources.Allocatable(capacity, n.kubeReservedL, n.systemReservedL, resources.EvictionReserve(n.evictionHardT, capacity))
}

// nodeResources is what the node setup gives the engine.
type nodeResources struct {
	capacity, allocatable v1.ResourceList
	cgroups               *cgroups.Manager // nil without --cgroups-per-qos
	// podsMemory is the kubepods memory cgroup's directory when node
	// allocatable is enforced on it (allocatableMemory.available), else "".
	podsMemory string
	// devices is the device-plugin manager; nil: none.
	devices *devicemanager.Manager
}

// signals is engine.Config.Signals: the host (engine/nodestats), with
// allocatableMemory.available from the pods cgroup when node allocatable
// is enforced on it; imagefs is measured on imageFsPath(the mountpoint the
// runtime names).
func (nd *nodeResources) signals(rootDir string, imageFsPath func(string) string) func(context.Context, string) (eviction.Observations, error) {
	h := nodestats.Host{Pods: nd.podsMemory}
	return func(_ context.Context, imageFs string) (eviction.Observations, error) {
		if imageFs != "" {
			imageFs = imageFsPath(imageFs)
		}
		return h.Measure(rootDir, imageFs)
	}
}

// setupNode reads the machine's capacity, computes allocatable and, with
// --cgroups-per-qos on a real runtime, creates the QoS hierarchy.
func setupNode(n nodeOptions, sim bool, log *slog.Logger) (*nodeResources, error) {
	capacity, err := cgroups.MachineCapacity("")
	if err != nil {
		return nil, err
	}
	out := &nodeResources{capacity: capacity}
	out.allocatable = n.allocatable(capacity)
	if !n.cgroupsPerQOS || sim {
		return out, nil
	}
	m, err := cgroups.New(cgroups.Options{Root: n.cgroupRoot, Parent: n.cgroupParent})
	if err != nil {
		return nil, fmt.Errorf("--cgroups-per-qos: %w (or run with --cgroups-per-qos=false --enforce-node-allocatable=none)", err)
	}
	// kubelet limits the pods cgroup to capacity less the reservations:
	// the hard eviction thresholds stay inside it, so that
	// allocatableMemory.available evicts before the cgroup's OOM killer.
	if err := m.Setup(resources.Allocatable(capacity, n.kubeReservedL, n.systemReservedL, nil), n.enforcePods); err != nil {
		return nil, fmt.Errorf("--cgroups-per-qos: %w (or run with --cgroups-per-qos=false --enforce-node-allocatable=none)", err)
	}
	// kubelet's order: the root's processes into the system cgroup, this
	// one among them, then this one into its own
	if n.systemCgroups != "" {
		moved, err := m.Adopt(n.systemCgroups)
		if err != nil {
			return nil, fmt.Errorf("--system-cgroups: %w", err)
		}
		log.Info("system cgroup", "cgroup", n.systemCgroups, "moved", moved)
	}
	if n.kubeletCgroups != "" {
		if err := m.Join(n.kubeletCgroups, os.Getpid()); err != nil {
			return nil, fmt.Errorf("--kubelet-cgroups: %w", err)
		}
	}
	out.cgroups = m
	if n.enforcePods {
		out.podsMemory = m.Dir("memory", m.PodsCgroup())
	}
	version := "v1"
	if m.V2() {
		version = "v2"
	}
	log.Info("node allocatable", "capacity", resources.String(capacity), "allocatable", resources.String(out.allocatable),
		"cgroups", version, "enforced", n.enforcePods)
	return out, nil
}
