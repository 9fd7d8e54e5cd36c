package engine

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/worker"
)

// workerHost is what the pod workers read of the engine (engine/worker):
// its settings and services, built once by New.
func (e *Engine) workerHost() worker.Host {
	cfg := &e.cfg
	return worker.Host{
		NodeName: cfg.NodeName, NodeIP: cfg.NodeIP, RootDir: cfg.RootDir,
		Node:              e.podNode(),
		SyncFrequency:     cfg.SyncFrequency,
		GCMaxPerContainer: cfg.ContainerGC.MaxPerContainer, GCMinAge: cfg.ContainerGC.MinAge,
		Events: cfg.Events, PodCgroups: cfg.PodCgroups,
		PublishedPod: cfg.PublishedPod, Services: cfg.Services, VolumeAPI: cfg.VolumeAPI,
		Runtime: e.rt, Clock: e.clock, Log: e.log, Metrics: e.metrics, Sinks: e.sinks,
		Volumes: e.volumes, PLEG: e.pleg, CrashBackoff: e.crashBackoff, PullBackoff: e.pullBackoff,
		RuntimeName: "cri",
		Engine:      workerEngine{e},
		Devices:     e.devicesOf(),
		Features:    e.RuntimeFeatures,
	}
}

// devicesOf is what a container's config reads of the device plugins;
// nil without a device manager.
func (e *Engine) devicesOf() func(ctx context.Context, pod *v1.Pod, c *v1.Container) (*podspec.DeviceRun, error) {
	if e.cfg.Devices == nil {
		return nil
	}
	return e.cfg.Devices.RunOptions
}

// podNode is the node as the pod-spec translation reads it (engine/podspec).
func (e *Engine) podNode() podspec.Node {
	return podspec.Node{RootDir: e.cfg.RootDir, PodLogsDir: e.cfg.PodLogsDir, LogLinksDir: e.cfg.ContainerLogLinksDir, MemoryCapacity: e.cfg.MemoryCapacity, Static: config.IsStatic,
		Name: e.cfg.NodeName, IP: e.cfg.NodeIP, Allocatable: podAllocatable(e.cfg.Allocatable),
		ClusterDNS: e.cfg.ClusterDNS, ClusterDomain: e.cfg.ClusterDomain, ResolvConf: e.cfg.ResolvConf,
		Warn: func(pod *v1.Pod, reason, msg string) {
			if r := e.cfg.Events; r != nil {
				r.Event(pod, "", v1.EventTypeWarning, reason, msg)
			}
		}}
}

// workerEngine is the engine as its pod workers ask it (worker.Engine).
type workerEngine struct{ e *Engine }

func (w workerEngine) NameTaken(full string, uid types.UID) bool { return w.e.nameTaken(full, uid) }
func (w workerEngine) ReleaseName(full string, uid types.UID)    { w.e.releaseName(full, uid) }
func (w workerEngine) WaitRuntime(ctx context.Context) error     { return w.e.waitRuntime(ctx) }
func (w workerEngine) Context() context.Context                  { return w.e.ctx() }
func (w workerEngine) FirstProbeDelay(period time.Duration) time.Duration {
	return w.e.firstProbeDelay(period)
}
