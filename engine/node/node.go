// Package node keeps speclet's Node object and its Lease alive in the API
// server, as kubelet's node status manager and node lease controller do.
//
// Contracts:
//   - Register creates the Node (or takes over an existing one of the same
//     name) with capacity and allocatable from the machine, addresses,
//     nodeInfo (runtime name and version, speclet's version), the labels
//     kubernetes.io/hostname, kubernetes.io/os and kubernetes.io/arch, and
//     daemonEndpoints.kubeletEndpoint.port. It retries with backoff (1 s
//     doubling to 30 s) while the API server is unreachable; a refused
//     credential (401/403) is logged as such on every attempt.
//   - Every StatusPeriod (--node-status-update-frequency, 10 s) the Node's
//     status is computed against the Node as the API server's cache has it
//     (a get with resourceVersion 0, as kubelet): Ready follows Health
//     (runtime and PLEG health), MemoryPressure, DiskPressure and
//     PIDPressure are the eviction manager's (Config.Pressure), or,
//     without one, the machine compared with kubelet's default hard
//     eviction thresholds (memory.available < 100Mi, nodefs.available <
//     10%, pids available < 10%). It is written only when something but
//     the conditions' heartbeat times changed, or ReportPeriod
//     (--node-status-report-frequency, 5 m) after the last write, as a
//     strategic merge patch of nodes/status (kubelet's PatchNodeStatus);
//     status fields others own (volumesAttached, images, ...) are kept.
//   - Each written condition change is recorded as kubelet's node status
//     event (Config.Event), "Node <name> status is now: <reason>":
//     NodeHasSufficientMemory / NodeHasInsufficientMemory,
//     NodeHasNoDiskPressure / NodeHasDiskPressure, NodeHasSufficientPID /
//     NodeHasInsufficientPID when the pressure condition is new or changes;
//     NodeReady / NodeNotReady when an existing Ready condition changes. It
//     is recorded once the status write succeeded.
//   - The Lease kube-node-lease/<node> is renewed every LeasePeriod
//     (kubelet's: a quarter of LeaseDuration, 10 s of 40 s) with
//     LeaseDuration (--node-lease-duration-seconds), owned by the Node: one
//     update of the Lease last written; it is read again only after a
//     failure (and created when missing).
//   - Failures of registration, status and Lease writes are logged once
//     per run (apierr.Once), naming an unreachable API server or a refused
//     credential.
//   - The node only ever reads its own Node object (a field selector or a
//     get by name): the Node authorizer refuses anything else.
//
// # Usage
//
//	n := node.New(node.Config{Client: cs, Name: "node-a", IP: "127.0.0.1", Health: eng.Healthz, ...})
//	go n.Run(ctx) // registers, then status and lease loops until ctx ends
//	uid := n.UID() // "" until registered (mirror pods own-reference the Node)
package node

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/speclet/speclet/engine/apierr"
	"github.com/speclet/speclet/engine/cgroups"
)

// Defaults, kubelet's.
const (
	DefaultStatusPeriod  = 10 * time.Second
	DefaultReportPeriod  = 5 * time.Minute
	DefaultLeaseDuration = 40 * time.Second
	// LeaseRenewFraction is kubelet's renew interval of the Lease, as a
	// fraction of its duration.
	LeaseRenewFraction = 0.25
	// LeaseNamespace holds the node leases.
	LeaseNamespace = "kube-node-lease"
)

// Config configures a Node keeper.
type Config struct {
	Client kubernetes.Interface
	Name   string
	// IP is the node's InternalIP (127.0.0.1 is accepted).
	IP string
	// Port is daemonEndpoints.kubeletEndpoint.port (0: none served).
	Port int32
	// MaxPods is the pods capacity.
	MaxPods int
	// Capacity is the machine's cpu and memory (cgroups.MachineCapacity);
	// nil: read from the machine.
	Capacity v1.ResourceList
	// Allocatable computes node allocatable from the capacity (cpu,
	// memory, ephemeral-storage, pods): capacity minus --kube-reserved,
	// --system-reserved and the hard eviction thresholds. nil: allocatable
	// is the capacity.
	Allocatable func(capacity v1.ResourceList) v1.ResourceList
	// Extended, when set, gives the extended resources of the device
	// plugins (engine/devicemanager's Capacity): every device in capacity,
	// the healthy ones in allocatable.
	Extended func() (capacity, allocatable v1.ResourceList)
	// RootDir is the filesystem whose space is ephemeral-storage.
	RootDir string
	// Version is speclet's version (nodeInfo.kubeletVersion).
	Version string
	// Runtime returns the runtime's name and version (nodeInfo's
	// containerRuntimeVersion is "<name>://<version>").
	Runtime func(ctx context.Context) (name, version string, err error)
	// RuntimeFeatures, when set, gives status.features and
	// status.runtimeHandlers from the runtime's Status (kubelet's
	// NodeFeatures and RuntimeHandlers setters); nil features leave
	// status.features as it was.
	RuntimeFeatures func() (*v1.NodeFeatures, []v1.NodeRuntimeHandler)
	// Health is nil when the runtime answers and the PLEG is healthy.
	Health func() error
	// Pressure, when set, gives MemoryPressure, DiskPressure and
	// PIDPressure: the eviction manager's conditions (its thresholds, held
	// for the pressure transition period). nil: the machine compared with
	// kubelet's default hard thresholds at each status update.
	Pressure func() map[v1.NodeConditionType]bool
	// Event, when set, records an event about the node: kubelet's
	// condition transition events (below). It must not block.
	Event func(eventType, reason, message string)
	// StatusPeriod, ReportPeriod and LeaseDuration default to kubelet's;
	// LeasePeriod to LeaseRenewFraction of LeaseDuration.
	StatusPeriod, ReportPeriod, LeasePeriod, LeaseDuration time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger
}

// Node keeps one Node object and its Lease.
type Node struct {
	cfg                   Config
	log                   *slog.Logger
	regFails, statusFails *apierr.Once
	leaseFails            *apierr.Once
	reported              time.Time      // last status write
	lease                 *coordv1.Lease // the Lease as last written; nil: read it
	mu                    sync.Mutex
	uid                   types.UID
	last                  *v1.Node // the Node as last written or read
}

// New returns a keeper for cfg.Name; Run starts it.
func New(cfg Config) *Node {
	if cfg.StatusPeriod <= 0 {
		cfg.StatusPeriod = DefaultStatusPeriod
	}
	if cfg.ReportPeriod <= 0 {
		cfg.ReportPeriod = DefaultReportPeriod
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.LeasePeriod <= 0 {
		cfg.LeasePeriod = time.Duration(float64(cfg.LeaseDuration) * LeaseRenewFraction)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Node{cfg: cfg, log: cfg.Log,
		regFails:    &apierr.Once{Log: cfg.Log, What: "register node " + cfg.Name},
		statusFails: &apierr.Once{Log: cfg.Log, What: "update node status of " + cfg.Name},
		leaseFails:  &apierr.Once{Log: cfg.Log, What: "renew node lease of " + cfg.Name}}
}

// UID is the registered Node's UID, "" before registration.
func (n *Node) UID() types.UID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.uid
}

// Name is the Node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Object is the Node as last written to the API server (labels others
// added included), nil before registration.
func (n *Node) Object() *v1.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.last == nil {
		return nil
	}
	return n.last.DeepCopy()
}

// Run registers the Node, then keeps its status and Lease until ctx ends.
func (n *Node) Run(ctx context.Context) {
	if !n.register(ctx) {
		return
	}
	go n.leaseLoop(ctx)
	t := time.NewTicker(n.cfg.StatusPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := n.updateStatus(ctx); err != nil {
			if ctx.Err() == nil {
				n.statusFails.Fail(err, "node", n.cfg.Name)
			}
		} else {
			n.statusFails.OK()
		}
	}
}

// register creates (or adopts) the Node, retrying with a backoff of 1 s
// doubling to 30 s until it succeeds or ctx ends.
func (n *Node) register(ctx context.Context) bool {
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Cap: 30 * time.Second, Steps: math.MaxInt32}
	var retryIn time.Duration // the wait after the failure just logged
	err := wait.DelayFunc(func() time.Duration { return retryIn }).Until(ctx, true, true, func(ctx context.Context) (bool, error) {
		err := n.tryRegister(ctx)
		if err == nil {
			n.regFails.OK()
			n.log.Info("node registered", "node", n.cfg.Name, "uid", n.UID())
			return true, nil
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		retryIn = backoff.Step()
		n.regFails.Fail(err, "node", n.cfg.Name, "retry-in", retryIn)
		return false, nil
	})
	return err == nil
}

func (n *Node) tryRegister(ctx context.Context) error {
	nodes := n.cfg.Client.CoreV1().Nodes()
	want := n.object(ctx)
	got, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = nodes.Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get existing node: %w", err)
		}
		for k, v := range want.Labels {
			if got.Labels == nil {
				got.Labels = map[string]string{}
			}
			got.Labels[k] = v
		}
		if got, err = nodes.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update existing node: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("create node: %w", err)
	}
	n.mu.Lock()
	n.uid, n.last = got.UID, got
	n.mu.Unlock()
	n.reported = time.Time{}
	_, err = n.updateStatus(ctx)
	return err
}

func (n *Node) object(ctx context.Context) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.cfg.Name,
			Labels: map[string]string{
				"kubernetes.io/hostname": n.cfg.Name,
				"kubernetes.io/os":       runtime.GOOS,
				"kubernetes.io/arch":     runtime.GOARCH,
			},
		},
	}
}

// status computes the Node's status now.
func (n *Node) status(ctx context.Context, prev []v1.NodeCondition) v1.NodeStatus {
	capacity := n.cfg.Capacity.DeepCopy()
	if capacity == nil {
		if c, err := cgroups.MachineCapacity(""); err == nil {
			capacity = c
		} else {
			capacity = v1.ResourceList{}
			n.log.Error("read machine capacity", "err", err)
		}
	}
	capacity[v1.ResourcePods] = *resource.NewQuantity(int64(n.cfg.MaxPods), resource.DecimalSI)
	if total, _, ok := diskSpace(n.cfg.RootDir); ok {
		capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(total), resource.BinarySI)
	}
	allocatable := capacity.DeepCopy()
	if n.cfg.Allocatable != nil {
		allocatable = n.cfg.Allocatable(capacity)
	}
	if n.cfg.Extended != nil {
		c, a := n.cfg.Extended()
		for name, q := range c {
			capacity[name] = q
		}
		for name, q := range a {
			allocatable[name] = q
		}
	}
	rtName, rtVersion := "unknown", "unknown"
	if n.cfg.Runtime != nil {
		if name, ver, err := n.cfg.Runtime(ctx); err == nil {
			rtName, rtVersion = name, ver
		}
	}
	now := metav1.NewTime(n.cfg.Now())
	var features *v1.NodeFeatures
	var handlers []v1.NodeRuntimeHandler
	if n.cfg.RuntimeFeatures != nil {
		features, handlers = n.cfg.RuntimeFeatures()
	}
	return v1.NodeStatus{
		Features:        features,
		RuntimeHandlers: handlers,
		Capacity:        capacity,
		Allocatable:     allocatable,
		Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: n.cfg.IP},
			{Type: v1.NodeHostName, Address: n.cfg.Name},
		},
		DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: n.cfg.Port}},
		NodeInfo: v1.NodeSystemInfo{
			MachineID:               readTrim("/etc/machine-id"),
			BootID:                  readTrim("/proc/sys/kernel/random/boot_id"),
			KernelVersion:           readTrim("/proc/sys/kernel/osrelease"),
			OSImage:                 osImage(),
			ContainerRuntimeVersion: rtName + "://" + rtVersion,
			KubeletVersion:          n.cfg.Version,
			OperatingSystem:         runtime.GOOS,
			Architecture:            runtime.GOARCH,
		},
		Conditions: n.conditions(prev, now),
	}
}
