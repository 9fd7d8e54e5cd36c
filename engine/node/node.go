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
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

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
	// RootDir is the filesystem whose space is ephemeral-storage.
	RootDir string
	// Version is speclet's version (nodeInfo.kubeletVersion).
	Version string
	// Runtime returns the runtime's name and version (nodeInfo's
	// containerRuntimeVersion is "<name>://<version>").
	Runtime func(ctx context.Context) (name, version string, err error)
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
	rtName, rtVersion := "unknown", "unknown"
	if n.cfg.Runtime != nil {
		if name, ver, err := n.cfg.Runtime(ctx); err == nil {
			rtName, rtVersion = name, ver
		}
	}
	now := metav1.NewTime(n.cfg.Now())
	return v1.NodeStatus{
		Capacity:    capacity,
		Allocatable: allocatable,
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

func (n *Node) health() error {
	if n.cfg.Health == nil {
		return nil
	}
	return n.cfg.Health()
}

// pressure is what the machine says of memory, disk and PIDs.
type pressure struct {
	memAvail, diskAvail, diskTotal, pidsUsed, pidMax uint64
}

func (n *Node) pressure() pressure {
	var p pressure
	if m, err := cgroups.Meminfo(""); err == nil {
		p.memAvail = m["MemAvailable"]
	}
	p.diskTotal, p.diskAvail, _ = diskSpace(n.cfg.RootDir)
	p.pidMax, _ = strconv.ParseUint(readTrim("/proc/sys/kernel/pid_max"), 10, 64)
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				p.pidsUsed++
			}
		}
	}
	return p
}

// conditions is the node's four conditions now: pressure from
// Config.Pressure when set, else measured.
func (n *Node) conditions(prev []v1.NodeCondition, now metav1.Time) []v1.NodeCondition {
	if n.cfg.Pressure == nil {
		return conditions(prev, now, n.health(), n.pressure())
	}
	c := n.cfg.Pressure()
	return conditionsOf(prev, now, n.health(), c[v1.NodeMemoryPressure], c[v1.NodeDiskPressure], c[v1.NodePIDPressure])
}

// conditions builds the four node conditions from the machine compared
// with kubelet's default hard eviction thresholds.
func conditions(prev []v1.NodeCondition, now metav1.Time, health error, p pressure) []v1.NodeCondition {
	memLow := p.memAvail > 0 && p.memAvail < 100<<20
	diskLow := p.diskTotal > 0 && p.diskAvail*10 < p.diskTotal
	pidLow := p.pidMax > 0 && (p.pidMax-min(p.pidsUsed, p.pidMax))*10 < p.pidMax
	return conditionsOf(prev, now, health, memLow, diskLow, pidLow)
}

// conditionsOf builds the four node conditions with kubelet's reasons and
// messages; a condition's lastTransitionTime moves only when its status
// changes.
func conditionsOf(prev []v1.NodeCondition, now metav1.Time, health error, memLow, diskLow, pidLow bool) []v1.NodeCondition {
	old := map[v1.NodeConditionType]v1.NodeCondition{}
	for _, c := range prev {
		old[c.Type] = c
	}
	mk := func(t v1.NodeConditionType, bad bool, badReason, okReason, badMsg, okMsg string) v1.NodeCondition {
		c := v1.NodeCondition{Type: t, Status: v1.ConditionFalse, Reason: okReason, Message: okMsg, LastHeartbeatTime: now, LastTransitionTime: now}
		if bad {
			c.Status, c.Reason, c.Message = v1.ConditionTrue, badReason, badMsg
		}
		if t == v1.NodeReady { // Ready is True when all is well
			c.Status = map[bool]v1.ConditionStatus{true: v1.ConditionFalse, false: v1.ConditionTrue}[bad]
		}
		if o, ok := old[t]; ok && o.Status == c.Status {
			c.LastTransitionTime = o.LastTransitionTime
		}
		return c
	}
	readyMsg := "speclet is posting ready status"
	notReady := ""
	if health != nil {
		notReady = health.Error()
	}
	return []v1.NodeCondition{
		mk(v1.NodeMemoryPressure, memLow, "KubeletHasInsufficientMemory", "KubeletHasSufficientMemory",
			"kubelet has insufficient memory available", "kubelet has sufficient memory available"),
		mk(v1.NodeDiskPressure, diskLow, "KubeletHasDiskPressure", "KubeletHasNoDiskPressure",
			"kubelet has disk pressure", "kubelet has no disk pressure"),
		mk(v1.NodePIDPressure, pidLow, "KubeletHasInsufficientPID", "KubeletHasSufficientPID",
			"kubelet has insufficient PID available", "kubelet has sufficient PID available"),
		mk(v1.NodeReady, health != nil, "KubeletNotReady", "KubeletReady", notReady, readyMsg),
	}
}

// transitionEvents is the reasons of kubelet's node status events for the
// conditions going from prev to next (its nodestatus setters).
func transitionEvents(prev, next []v1.NodeCondition) []string {
	old := map[v1.NodeConditionType]v1.ConditionStatus{}
	for _, c := range prev {
		old[c.Type] = c.Status
	}
	var out []string
	for _, c := range next {
		o, had := old[c.Type]
		if o == c.Status {
			continue
		}
		bad := c.Status == v1.ConditionTrue
		switch c.Type {
		case v1.NodeMemoryPressure:
			out = append(out, map[bool]string{true: "NodeHasInsufficientMemory", false: "NodeHasSufficientMemory"}[bad])
		case v1.NodeDiskPressure:
			out = append(out, map[bool]string{true: "NodeHasDiskPressure", false: "NodeHasNoDiskPressure"}[bad])
		case v1.NodePIDPressure:
			out = append(out, map[bool]string{true: "NodeHasInsufficientPID", false: "NodeHasSufficientPID"}[bad])
		case v1.NodeReady:
			if had { // kubelet records Ready only when an existing condition changes
				out = append(out, map[bool]string{true: "NodeReady", false: "NodeNotReady"}[bad])
			}
		}
	}
	return out
}

// updateStatus computes the Node's status and writes it when it changed
// or ReportPeriod passed; it reports whether it wrote.
func (n *Node) updateStatus(ctx context.Context) (bool, error) {
	nodes := n.cfg.Client.CoreV1().Nodes()
	// The API server's cache, as kubelet reads it: a write that changes
	// nothing is skipped, and a condition others set (the node lifecycle
	// controller's Unknown) is seen.
	cur, err := nodes.Get(ctx, n.cfg.Name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		// The cache may trail the Create that registration just made.
		cur, err = nodes.Get(ctx, n.cfg.Name, metav1.GetOptions{})
	}
	if err != nil {
		return false, fmt.Errorf("get node: %w", err)
	}
	prev := cur.Status.Conditions
	mine := n.status(ctx, prev)
	next := cur.DeepCopy()
	next.Status.Capacity, next.Status.Allocatable = mine.Capacity, mine.Allocatable
	next.Status.Addresses, next.Status.DaemonEndpoints = mine.Addresses, mine.DaemonEndpoints
	next.Status.NodeInfo, next.Status.Conditions = mine.NodeInfo, mine.Conditions
	now := n.cfg.Now()
	if !statusChanged(cur.Status, next.Status) && !n.reported.IsZero() && now.Sub(n.reported) < n.cfg.ReportPeriod {
		n.mu.Lock()
		n.uid, n.last = cur.UID, cur
		n.mu.Unlock()
		return false, nil
	}
	patch, err := nodeStatusPatch(cur, next)
	if err != nil {
		return false, err
	}
	got, err := nodes.Patch(ctx, n.cfg.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return false, fmt.Errorf("write node status: %w", err)
	}
	n.reported = now
	if n.cfg.Event != nil {
		for _, reason := range transitionEvents(prev, next.Status.Conditions) {
			n.cfg.Event(v1.EventTypeNormal, reason, fmt.Sprintf("Node %s status is now: %s", n.cfg.Name, reason))
		}
	}
	n.mu.Lock()
	n.uid, n.last = got.UID, got
	n.mu.Unlock()
	return true, nil
}

// statusChanged is kubelet's nodeStatusHasChanged: anything but the
// conditions' heartbeat times differs.
func statusChanged(old, next v1.NodeStatus) bool {
	strip := func(s v1.NodeStatus) v1.NodeStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return s
	}
	return !apiequality.Semantic.DeepEqual(strip(old), strip(next))
}

// nodeStatusPatch is kubelet's node status patch: the two-way strategic
// merge patch from old to next. next is old with another status, so the
// patch holds the status only (no resourceVersion: it does not fail on a
// Node changed since).
func nodeStatusPatch(old, next *v1.Node) ([]byte, error) {
	oldJSON, err := json.Marshal(old)
	if err != nil {
		return nil, fmt.Errorf("marshal node: %w", err)
	}
	nextJSON, err := json.Marshal(next)
	if err != nil {
		return nil, fmt.Errorf("marshal node: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, nextJSON, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("make node status patch: %w", err)
	}
	return patch, nil
}

func (n *Node) leaseLoop(ctx context.Context) {
	t := time.NewTicker(n.cfg.LeasePeriod)
	defer t.Stop()
	for {
		if err := n.renewLease(ctx); err != nil {
			if ctx.Err() == nil {
				n.leaseFails.Fail(err, "node", n.cfg.Name)
			}
		} else {
			n.leaseFails.OK()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renewLease updates the Lease last written (one request); after a
// failure, or the first time, it reads it (creating it when missing).
func (n *Node) renewLease(ctx context.Context) error {
	leases := n.cfg.Client.CoordinationV1().Leases(LeaseNamespace)
	now := metav1.NewMicroTime(n.cfg.Now())
	l := n.lease
	n.lease = nil // kept again once written
	if l == nil {
		got, err := leases.Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			got = &coordv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Name, Namespace: LeaseNamespace, OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: n.cfg.Name, UID: n.UID(),
				}}},
				Spec: coordv1.LeaseSpec{
					HolderIdentity:       ptr.To(n.cfg.Name),
					LeaseDurationSeconds: ptr.To(int32(n.cfg.LeaseDuration / time.Second)),
					RenewTime:            &now,
				},
			}
			created, err := leases.Create(ctx, got, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("create lease: %w", err)
			}
			n.lease = created
			return nil
		}
		if err != nil {
			return fmt.Errorf("get lease: %w", err)
		}
		l = got
	}
	l = l.DeepCopy()
	l.Spec.HolderIdentity = ptr.To(n.cfg.Name)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(n.cfg.LeaseDuration / time.Second))
	l.Spec.RenewTime = &now
	got, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("update lease: %w", err)
	}
	n.lease = got
	return nil
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func osImage() string {
	f, err := os.Open("/etc/os-release")
	if err != nil {
		return runtime.GOOS
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return runtime.GOOS
}

func diskSpace(dir string) (total, avail uint64, ok bool) {
	var st syscall.Statfs_t
	if dir == "" || syscall.Statfs(dir, &st) != nil {
		return 0, 0, false
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), true
}
