package main

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/engine/containerlogs"
)

// kubeletConfig is what the kubelet API's /configz shows of the node, as
// kubelet's does: a kubelet.config.k8s.io/v1beta1 KubeletConfiguration of
// the settings the node runs with (the flags, the defaults they took, and
// what speclet fixes). A field of the type speclet has no setting for is
// left out, not filled with kubelet's default. endpoint is the runtime the
// node talks to (the simulated runtime's socket with --runtime=sim).
func (o *runOptions) kubeletConfig(endpoint string) *kubeletconfig.KubeletConfiguration {
	d := func(v time.Duration) metav1.Duration { return metav1.Duration{Duration: v} }
	sim := o.runtime == "sim"
	// --cgroups-per-qos and node allocatable are not applied on the
	// simulated runtime (setupNode).
	perQOS := o.node.cgroupsPerQOS && !sim
	enforce := []string{"none"}
	if o.node.enforcePods && perQOS {
		enforce = []string{"pods"}
	}
	c := &kubeletconfig.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{Kind: "KubeletConfiguration", APIVersion: kubeletconfig.SchemeGroupVersion.String()},

		EnableServer:            ptr.To(o.port != 0),
		StaticPodPath:           o.manifestPath,
		PodLogsDir:              o.podLogsDir,
		SyncFrequency:           d(o.syncFrequency),
		FileCheckFrequency:      d(o.fileCheckFrequency),
		HTTPCheckFrequency:      d(o.httpCheckFrequency),
		StaticPodURL:            o.manifestURL,
		Address:                 o.address,
		Port:                    int32(o.port),
		ReadOnlyPort:            int32(o.readOnlyPort),
		TLSCertFile:             o.tlsCertFile,
		TLSPrivateKeyFile:       o.tlsPrivateKeyFile,
		TLSMinVersion:           "VersionTLS12", // kubeletapi.TLSConfig
		ServerTLSBootstrap:      o.rotateServerCertificates,
		EnableDebuggingHandlers: ptr.To(true), // logs, exec, attach, port-forward, run: always on the kubelet API
		// speclet serves the profiles on its read-only server
		// (readOnlyMux), not on the kubelet API
		EnableProfilingHandler:   ptr.To(o.enableProfiling),
		HealthzPort:              ptr.To(int32(o.healthzPort)),
		HealthzBindAddress:       o.healthzBindAddress,
		ClusterDomain:            o.clusterDomain,
		ClusterDNS:               slices.Clone([]string(o.clusterDNS)),
		ResolverConfig:           ptr.To(o.resolvConf),
		MaxPods:                  int32(o.maxPods),
		RuntimeRequestTimeout:    d(o.requestTimeout),
		ContainerRuntimeEndpoint: endpoint,

		NodeStatusUpdateFrequency: d(o.nodeStatusUpdate),
		NodeStatusReportFrequency: d(o.nodeStatusReport),
		NodeLeaseDurationSeconds:  int32(o.nodeLeaseDuration),
		RegisterNode:              ptr.To(o.kubeconfig != ""),
		KubeAPIQPS:                wholeQPS(o.kubeAPIQPS),
		KubeAPIBurst:              int32(o.kubeAPIBurst),
		EventRecordQPS:            wholeQPS(o.eventQPS),
		EventBurst:                int32(o.eventBurst),

		ImageMinimumGCAge:           d(o.minImageTTL),
		ImageGCHighThresholdPercent: ptr.To(int32(o.imageGCHigh)),
		ImageGCLowThresholdPercent:  ptr.To(int32(o.imageGCLow)),

		ContainerLogMaxSize:         o.containerLogMaxSize,
		ContainerLogMaxFiles:        ptr.To(int32(o.containerLogMaxFiles)),
		ContainerLogMonitorInterval: ptr.To(d(containerlogs.DefaultPeriod)),

		CgroupDriver:           "cgroupfs", // engine/cgroups' only driver
		CgroupsPerQOS:          ptr.To(perQOS),
		CgroupRoot:             o.node.cgroupParent,
		KubeletCgroups:         o.node.kubeletCgroups,
		SystemCgroups:          o.node.systemCgroups,
		KubeReserved:           quantities(o.node.kubeReservedL),
		SystemReserved:         quantities(o.node.systemReservedL),
		EnforceNodeAllocatable: enforce,

		EvictionHard:                     thresholds(o.node.evictionHard),
		EvictionSoft:                     thresholds(o.node.evictionSoft),
		EvictionSoftGracePeriod:          durations(o.node.evictionGraceM),
		EvictionMinimumReclaim:           quantities(o.node.evictionMinRecl),
		EvictionPressureTransitionPeriod: d(o.node.evictionTrans),
		EvictionMaxPodGracePeriod:        int32(o.node.evictionMaxPodG),

		AllowedUnsafeSysctls: splitList(o.unsafeSysctls),
	}
	// --log-format (text, json: kubelet's format names) and -v; of the
	// logging configuration nothing else is a setting of speclet's
	c.Logging.Format = o.logFormat
	c.Logging.Verbosity = logsapi.VerbosityLevel(o.verbosity)
	c.Authentication.X509.ClientCAFile = o.clientCAFile
	// bearer tokens are reviewed (TokenReview) with --kubeconfig only
	c.Authentication.Webhook.Enabled = ptr.To(o.kubeconfig != "")
	c.Authentication.Webhook.CacheTTL = d(o.tokenCacheTTL)
	c.Authentication.Anonymous.Enabled = ptr.To(o.anonymousAuth)
	c.Authorization.Mode = kubeletconfig.KubeletAuthorizationMode(o.authorizationMode)
	c.Authorization.Webhook.CacheAuthorizedTTL = d(o.authorizedCacheTTL)
	c.Authorization.Webhook.CacheUnauthorizedTTL = d(o.unauthorizedCacheTTL)
	return c
}

// unsetFields are the fields of KubeletConfiguration that its JSON
// encoding always writes (no omitempty) and speclet has no setting for.
var unsetFields = []string{"streamingConnectionIdleTimeout", "imageMaximumGCAge", "volumeStatsAggPeriod",
	"cpuManagerReconcilePeriod", "shutdownGracePeriod", "shutdownGracePeriodCriticalPods", "memorySwap", "crashLoopBackOff"}

// configz is kubeletConfig as /configz serves it: its JSON object without
// unsetFields.
func (o *runOptions) configz(endpoint string) (map[string]any, error) {
	b, err := json.Marshal(o.kubeletConfig(endpoint))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for _, f := range unsetFields {
		delete(m, f)
	}
	if l, ok := m["logging"].(map[string]any); ok {
		m["logging"] = map[string]any{"format": l["format"], "verbosity": l["verbosity"]}
	}
	return m, nil
}

// wholeQPS is a rate of the flags as the type's whole number per second;
// nil (left out) when it has a fraction the type cannot hold.
func wholeQPS(qps float64) *int32 {
	if qps != math.Trunc(qps) || qps > math.MaxInt32 {
		return nil
	}
	return ptr.To(int32(qps))
}

// thresholds maps eviction thresholds of a checked flag
// ("memory.available<100Mi,nodefs.available<10%") by signal; nil for none.
func thresholds(flag string) map[string]string {
	var out map[string]string
	for _, item := range splitList(flag) {
		if sig, val, ok := strings.Cut(item, "<"); ok {
			if out == nil {
				out = map[string]string{}
			}
			out[sig] = val
		}
	}
	return out
}

// quantities is a map of quantities as strings; nil for an empty one.
func quantities[K ~string](m map[K]resource.Quantity) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, q := range m {
		out[string(k)] = q.String()
	}
	return out
}

// durations is a map of durations as strings; nil for an empty one.
func durations(m map[string]time.Duration) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v.String()
	}
	return out
}

// splitList is a comma-separated flag's items, trimmed, empty ones left out.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
