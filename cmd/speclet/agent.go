package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/eviction"
)

// agent is what one node is made of besides its flags: the runtime it
// drives, its side of the API server and its resources. `speclet run`
// builds one; `speclet hollow` one per hollow node, all through newEngine,
// so that a hollow node is the same engine `speclet run` runs.
type agent struct {
	// rt is the runtime as every caller gets it (`speclet run`: audited
	// with --cri-audit-log and metered on reg).
	rt  cri.Runtime
	api *apiClient // nil without --kubeconfig
	nd  *nodeResources
	// reg receives the engine's metrics; nil: none.
	reg prometheus.Registerer
	// probeReg receives the engine's prober series (/metrics/probes);
	// nil: none.
	probeReg prometheus.Registerer
	// signals overrides nd.signals (the host measured at every eviction
	// pass); nil: nd.signals.
	signals func(context.Context, string) (eviction.Observations, error)
	log     *slog.Logger
}

// sources are the pod sources o declares (engine.Config.Sources).
func (o *runOptions) sources(api *apiClient) []string {
	sources := []string{}
	if o.manifestPath != "" {
		sources = append(sources, config.SourceFile)
	}
	if o.manifestURL != "" {
		sources = append(sources, config.SourceHTTP)
	}
	if api != nil {
		sources = append(sources, config.SourceAPI)
	}
	return sources
}

// newEngine is the engine of one node: the options o over a's runtime,
// API client and resources. ctx bounds the API informers it starts.
func newEngine(ctx context.Context, o *runOptions, a agent) (*engine.Engine, error) {
	var podCgroups engine.PodCgroups
	if a.nd.cgroups != nil {
		podCgroups = a.nd.cgroups
	}
	signals := a.signals
	if signals == nil {
		signals = a.nd.signals(o.rootDir, o.imageFsPath)
	}
	api := a.api
	events := api.recorder(ctx, o.nodeName)
	eng, err := engine.New(engine.Config{
		PodCgroups:           podCgroups,
		Allocatable:          a.nd.allocatable,
		Devices:              a.nd.engineDevices(),
		MemoryCapacity:       a.nd.capacity.Memory().Value(),
		Runtime:              a.rt,
		NodeName:             o.nodeName,
		RootDir:              o.rootDir,
		PodLogsDir:           o.podLogsDir,
		ContainerLogLinksDir: o.containerLogLinksDir,
		SyncFrequency:        o.syncFrequency,
		CrashLoopBackOffBase: o.crashLoopBackOffBase,
		ContainerGC:          o.containerGC(),
		NodePolicy: engine.NodePolicy{
			ImageGC:             o.imageGC(),
			FsStat:              o.fsStat(),
			Eviction:            o.node.evictionManager(),
			Signals:             signals,
			EvictionPeriod:      o.evictionPeriod,
			EvictionMaxPodGrace: o.node.evictionMaxPodG,
		},
		ImagePullBackOffBase: o.imagePullBackOffBase,
		Registerer:           a.reg,
		ProbeRegisterer:      a.probeReg,
		Log:                  a.log,
		MaxPods:              o.maxPods,
		NodeIP:               o.nodeIP,
		ClusterDNS:           o.clusterDNS,
		ClusterDomain:        o.clusterDomain,
		ResolvConf:           o.resolvConf,
		Sources:              o.sources(api),
		PublishedPod:         api.published,
		VolumeAPI:            api.volumes(),
		Events:               events,
		NodeEvents:           api.nodeRecorder(),
		Node:                 api.nodeObject,
		RuntimeClasses:       api.runtimeClasses(ctx),
		Services:             api.services(ctx),
		Sysctls:              o.sysctls,
	})
	if err != nil {
		return nil, fmt.Errorf("create engine: %w", err)
	}
	return eng, nil
}
