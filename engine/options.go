// Engine configuration: what New accepts.

package engine

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/reclaim"
	"github.com/speclet/speclet/engine/userns"
	"github.com/speclet/speclet/engine/volume"
	"github.com/speclet/speclet/fsm"
)

// Defaults, read from the spec's durations (spec/pod.hcl, container.hcl):
// kubelet's values. Flags override the bases.
var (
	DefaultSyncFrequency        = fsm.PodDurationDefaults[fsm.PodDurationResync]
	DefaultCrashLoopBackOffBase = fsm.ContainerDurationDefaults[fsm.ContainerDurationCrashloop]
	CrashLoopBackOffMax         = fsm.ContainerDurationMax[fsm.ContainerDurationCrashloop]
	DefaultImagePullBackOffBase = fsm.ContainerDurationDefaults[fsm.ContainerDurationImagePullBackoff]
	ImagePullBackOffMax         = fsm.ContainerDurationMax[fsm.ContainerDurationImagePullBackoff]
)

// Config configures an Engine. Zero values get kubelet's defaults.
type Config struct {
	Runtime  cri.Runtime
	NodeName string
	RootDir  string
	// PodLogsDir holds each pod's log directory, the sandbox's
	// LogDirectory (kubelet's podLogsDir; speclet run's --pod-logs-dir,
	// /var/log/pods); "": <RootDir>/logs.
	PodLogsDir string
	// ContainerLogLinksDir holds the link kubelet makes in
	// /var/log/containers to the log file of each container instance that
	// started, where log shippers look (speclet run's
	// --container-log-links-dir); "": <RootDir>/containers.
	ContainerLogLinksDir string
	SyncFrequency        time.Duration // default 1 min (jittered)
	CrashLoopBackOffBase time.Duration // default 10 s; max 300 s (CrashLoopBackOffMax)
	ImagePullBackOffBase time.Duration // default 10 s; max 300 s
	Clock                clock.WithTicker
	Registerer           prometheus.Registerer // nil = no metrics
	// ProbeRegisterer gets kubelet's prober series (prober_probe_total,
	// prober_probe_duration_seconds), which kubelet serves on
	// /metrics/probes; nil, or a nil Registerer: none.
	ProbeRegisterer prometheus.Registerer
	Log             *slog.Logger // nil = slog.Default()
	// Steps, when set, is told of every transition any machine takes (a
	// Step), after the engine's own observers and before the step's
	// actions run: for tracing, or to count the spec rows taken. It is
	// called on the machine's goroutine (each pod's worker, the node
	// machine's), so concurrently for different pods, and must not block.
	Steps func(Step)
	// ProbeJitter returns the delay of the first probe of a worker that
	// starts within one period of the engine's start (kubelet's jitter);
	// nil = uniform in [0, period).
	ProbeJitter func(period time.Duration) time.Duration
	// NodeIP is the node's address in pod statuses (hostIP, and podIP of
	// hostNetwork pods); "" = the first global unicast address of the
	// machine's interfaces, if any.
	NodeIP string
	// ClusterDNS are the cluster's DNS servers (--cluster-dns) and
	// ClusterDomain its domain (--cluster-domain): a ClusterFirst pod
	// resolves through them (engine/podspec.DNS); without servers such a
	// pod falls back to Default with a MissingClusterDNS warning.
	ClusterDNS    []string
	ClusterDomain string
	// ResolvConf is the node's resolver file that Default DNS pods copy
	// (--resolv-conf, /etc/resolv.conf there); "": none (nameserver
	// 127.0.0.1, as kubelet's --resolv-conf="").
	ResolvConf string
	// Services lists the cluster's services, for the service variables of
	// a container's environment (engine/podspec.ServiceEnv); an error
	// (services not read yet) is a CreateContainerConfigError of a pod
	// from the API server. nil (no API server): no service variables.
	Services func() ([]*v1.Service, error)
	// MaxPods is the node's pods capacity (kubelet's --max-pods): a pod
	// declared while that many admitted pods are active is refused
	// admission, Failed with reason OutOfpods, as kubelet's resource fit
	// refuses it. 0 = no limit. With the manifest limits of engine/config
	// it bounds what a CRI list call returns (MaxSandboxRecordBytes,
	// MaxContainerRecordBytes): a refused pod has no sandbox.
	MaxPods int
	// CrashLoopBackOffMax caps the CrashLoopBackOff delay; default the
	// spec's 300 s (kubelet's maxContainerRestartPeriod).
	CrashLoopBackOffMax time.Duration
	// ContainerGC is the policy for dead container instances.
	ContainerGC ContainerGCPolicy
	// ContainerGCPeriod is how often the node machine enforces the
	// node-wide limit ContainerGC.MaxContainers (kubelet's
	// ContainerGCPeriod: 1 min, the default).
	ContainerGCPeriod time.Duration
	// UserNamespaces is where the ID ranges of hostUsers: false pods come
	// from (engine/userns: the user database and subordinate ID files, the
	// IDs per pod); the engine sets PodsDir (<RootDir>/pods) and MaxPods.
	// The zero value: the kubelet user's /etc/subuid and /etc/subgid
	// entry, or every ID from 65536, 65536 IDs per pod.
	UserNamespaces userns.Config
	// PodCgroups, when set, gives every pod a cgroup under its QoS class
	// (kubelet's --cgroups-per-qos), the CgroupParent of its sandbox;
	// nil leaves the cgroups to the runtime.
	PodCgroups PodCgroups
	// Allocatable is node allocatable (capacity - reserved - hard
	// eviction thresholds); a new pod whose requests do not fit beside the
	// admitted ones fails with OutOfcpu / OutOfmemory. nil: no check. It is
	// also what a downward API limits.* of a container without a limit
	// falls back to (nil: the machine's capacity).
	Allocatable v1.ResourceList
	// Devices, when set, is the device-plugin manager: a pod's device
	// resources are allocated at admission (a pod they do not fit fails
	// with UnexpectedAdmissionError) and reach its containers' configs.
	Devices Devices
	// Node returns the node as the control plane knows it (its labels are
	// what required node affinity and nodeSelector match at admission):
	// the last one seen, or when fresh is set one read from the API server
	// now (admission asks so only for a pod that node affinity alone
	// refuses). nil, or a nil answer: the node as speclet registers it
	// (NodeName and the hostname, os and arch labels).
	Node func(fresh bool) *v1.Node
	// Sysctls is the node's sysctl allowlist (kubelet's safe sysctls and
	// --allowed-unsafe-sysctls); nil: the safe sysctls of this kernel.
	Sysctls *podspec.Sysctls
	// RuntimeClasses resolves a pod's runtimeClassName to the handler its
	// sandbox is created with; nil (no RuntimeClass API): a pod naming a
	// class is refused admission (RuntimeClassNotFound).
	RuntimeClasses RuntimeClasses
	// MemoryCapacity is the node's memory in bytes, which the
	// oom_score_adj of Burstable containers is computed against; 0 gives
	// every Burstable container 999.
	MemoryCapacity int64
	// VolumeAPI is where configMap, secret and serviceAccountToken volumes
	// come from (volume.Clientset over the --kubeconfig client); nil: such
	// volumes fail to mount with a FailedMount naming the missing API.
	VolumeAPI volume.API
	// Sources are the pod sources (config.SourceFile, SourceHTTP, SourceAPI)
	// that must each deliver their first snapshot before housekeeping treats
	// a runtime pod no source declares as an orphan and kills it. nil: the
	// first update of any source (and sourcesSettle) suffices.
	Sources []string
	// PublishedPod, when set, is called with each pod a worker published,
	// read-only: the API status manager's dirty set. It must not block.
	PublishedPod func(p *v1.Pod)
	// Events receives the pod events (nil: none are recorded).
	Events EventRecorder
	// NodeEvents receives the node's events (nil: none are recorded).
	NodeEvents NodeEventRecorder
	// NodePolicy is image GC and eviction (its fields are promoted:
	// ImageGC, ImageGCPeriod, FsStat, Eviction, EvictionPeriod, Signals,
	// EvictionMaxPodGrace), as the node machine (engine/reclaim) runs them.
	NodePolicy
}

// NodePolicy is what the node's flags say of image GC and eviction
// (engine/reclaim's Policy, where each field's default is named).
type NodePolicy = reclaim.Policy

// ContainerGCPolicy is kubelet's container GC policy for the dead
// instances of a container (--minimum-container-ttl-duration,
// --maximum-dead-containers-per-container).
type ContainerGCPolicy struct {
	// MinAge: an instance created less than this long ago is not removed.
	MinAge time.Duration
	// MaxPerContainer is how many dead instances of one container of a pod
	// stay in the runtime; the newest one always stays (its exit is the
	// container's lastState and its log is `logs --previous`), so 0 and 1
	// mean the same. Default 1.
	MaxPerContainer int
	// MaxContainers is the node-wide limit on dead instances
	// (--maximum-dead-containers), enforced with the per-container limit
	// by the node machine every ContainerGCPeriod (engine/containergc);
	// nil: no node-wide limit and no such pass (kubelet's -1). The newest
	// dead instance of each container still stays.
	MaxContainers *int
}

// PodCgroups owns the pod cgroups (engine/cgroups on a real node).
type PodCgroups interface {
	// Parent is the pod's cgroup, the CgroupParent of its sandbox.
	Parent(pod *v1.Pod) string
	// Ensure creates or updates the pod's cgroup with its limits.
	Ensure(pod *v1.Pod) error
	// Remove removes the pod's cgroup; no process of the pod is left.
	Remove(uid types.UID) error
	// Pods lists the UIDs whose cgroups exist, but for those skip
	// reports.
	Pods(skip func(types.UID) bool) ([]types.UID, error)
}
