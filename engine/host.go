package engine

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/metrics"
	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/engine/pleg"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/volume"
)

// host is what the pod workers read of the node they run on: the engine's
// settings and shared services. New builds it once; the engine embeds it
// (these are the engine's own fields) and every pod worker, and the
// machines' owners under it, hold a pointer to it. The pod side reads
// nothing else of the engine, and asks the engine what it owns (the
// static names, the runtime's gate, the run context) only through eng.
type host struct {
	cfg     Config
	rt      cri.Runtime
	clock   clock.WithTicker
	log     *slog.Logger
	metrics *metrics.Metrics
	sinks   observe.Sinks   // the common observers' (engine/observe)
	volumes *volume.Manager // sets up and tears down pod volumes

	// allocatable is what a resourceFieldRef limit falls back to
	// (podAllocatable).
	allocatable v1.ResourceList

	crashBackoff *backoff
	pullBackoff  *backoff
	pleg         *pleg.PLEG

	// runtimeName prefixes container IDs in statuses ("containerd://<id>"),
	// from the runtime's Version; "cri" when it does not say. Run sets it
	// before the sync loop starts.
	runtimeName string

	eng podEngine // the engine, for what it owns
}

// podEngine is what a pod worker asks of the engine that runs it.
type podEngine interface {
	// nameTaken: another UID holds the static full name or waits for it
	// ahead of uid; releaseName gives it up (names.go).
	nameTaken(full string, uid types.UID) bool
	releaseName(full string, uid types.UID)
	// waitRuntime blocks while the runtime is marked down.
	waitRuntime(ctx context.Context) error
	// ctx is the context of Run: probe workers end with it.
	ctx() context.Context
	// firstProbeDelay is a first probe's jitter: the engine's while it
	// started less than period ago, else 0.
	firstProbeDelay(period time.Duration) time.Duration
}

// podNode is the node as the pod-spec translation reads it (engine/podspec).
func (h *host) podNode() podspec.Node {
	return podspec.Node{RootDir: h.cfg.RootDir, MemoryCapacity: h.cfg.MemoryCapacity, Static: config.IsStatic,
		Name: h.cfg.NodeName, IP: h.cfg.NodeIP, Allocatable: h.allocatable,
		ClusterDNS: h.cfg.ClusterDNS, ClusterDomain: h.cfg.ClusterDomain, ResolvConf: h.cfg.ResolvConf,
		Warn: func(pod *v1.Pod, reason, msg string) {
			if r := h.cfg.Events; r != nil {
				r.Event(pod, "", eventWarning, reason, msg)
			}
		}}
}
