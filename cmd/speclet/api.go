package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	nodeinformers "k8s.io/client-go/informers/node/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	nodelisters "k8s.io/client-go/listers/node/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/apistatus"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/node"
	"github.com/speclet/speclet/engine/volume"
)

// apiClient is speclet's side of the API server (--kubeconfig): the pod
// source, the Node and its Lease, and the status manager.
type apiClient struct {
	cs     *kubernetes.Clientset
	evcs   *kubernetes.Clientset             // events: --event-qps, --event-burst
	status atomic.Pointer[apistatus.Manager] // set by start
	events *apistatus.Events
	node   atomic.Pointer[node.Node] // set by start
}

func newAPIClient(o *runOptions) (*apiClient, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.kubeAPIQPS), o.kubeAPIBurst
	cfg.UserAgent = "speclet/" + specletVersion()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	evcfg := rest.CopyConfig(cfg)
	evcfg.QPS, evcfg.Burst = float32(o.eventQPS), o.eventBurst
	evcs, err := kubernetes.NewForConfig(evcfg)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	return &apiClient{cs: cs, evcs: evcs}, nil
}

// volumes is engine.Config.VolumeAPI: configMaps, secrets and service
// account tokens read with the node's credentials; nil without
// --kubeconfig (such volumes then fail to mount, naming the missing API).
func (a *apiClient) volumes() volume.API {
	if a == nil {
		return nil
	}
	return volume.Clientset(a.cs)
}

// recorder is engine.Config.Events: nil without --kubeconfig.
func (a *apiClient) recorder(ctx context.Context, node string) engine.EventRecorder {
	if a == nil {
		return nil
	}
	a.events = apistatus.NewEvents(ctx, a.evcs, node)
	return a.events
}

// nodeRecorder is engine.Config.NodeEvents (after recorder): nil without
// --kubeconfig.
func (a *apiClient) nodeRecorder() engine.NodeEventRecorder {
	if a == nil || a.events == nil {
		return nil
	}
	return a.events
}

// nodeEvent records an event about the node; a no-op without --kubeconfig.
func (a *apiClient) nodeEvent(eventType, reason, message string) {
	if a != nil && a.events != nil {
		a.events.NodeEvent(eventType, reason, message)
	}
}

// nodeObject is engine.Config.Node: the Node as last written (with the
// labels others gave it), or when fresh one read now (5 s at most, the
// last written one if that fails); nil before registration or without
// --kubeconfig.
func (a *apiClient) nodeObject(fresh bool) *v1.Node {
	if a == nil {
		return nil
	}
	n := a.node.Load()
	if n == nil {
		return nil
	}
	if fresh {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if got, err := a.cs.CoreV1().Nodes().Get(ctx, n.Name(), metav1.GetOptions{}); err == nil {
			return got
		}
	}
	return n.Object()
}

// runtimeClasses is engine.Config.RuntimeClasses: an informer over the
// RuntimeClass API (as kubelet's runtimeclass manager); nil without
// --kubeconfig.
func (a *apiClient) runtimeClasses(ctx context.Context) engine.RuntimeClasses {
	if a == nil {
		return nil
	}
	return runtimeClassLookup(ctx, a.cs)
}

// runtimeClassLookup resolves a RuntimeClass name to its handler through an
// informer's lister once it has synced, and with a GET before, or when the
// lister does not have the name: a RuntimeClass created a moment before the
// pod that names it may not have come through the watch yet, and a pod
// refused for it (RuntimeClassNotFound) would fail for good.
//
// The informer is the one informers.NewSharedInformerFactory(cs, 0) makes,
// built from its package so that the factory, which links every API
// group's informers and listers, stays out of the binary.
func runtimeClassLookup(ctx context.Context, cs kubernetes.Interface) engine.RuntimeClasses {
	inf := nodeinformers.NewRuntimeClassInformer(cs, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	lister := nodelisters.NewRuntimeClassLister(inf.GetIndexer())
	synced := inf.HasSynced
	go inf.Run(ctx.Done())
	return func(name string) (string, error) {
		if synced() {
			rc, err := lister.Get(name)
			if err == nil {
				return rc.Handler, nil
			}
			if !apierrors.IsNotFound(err) {
				return "", err
			}
		}
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		rc, err := cs.NodeV1().RuntimeClasses().Get(gctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return rc.Handler, nil
	}
}

// services is engine.Config.Services: an informer over every Service (as
// kubelet's service lister), listed once synced; nil without --kubeconfig.
// The informer is the shared informer factory's, as in runtimeClassLookup.
func (a *apiClient) services(ctx context.Context) func() ([]*v1.Service, error) {
	if a == nil {
		return nil
	}
	inf := coreinformers.NewServiceInformer(a.cs, metav1.NamespaceAll, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	lister := corelisters.NewServiceLister(inf.GetIndexer())
	synced := inf.HasSynced
	go inf.Run(ctx.Done())
	return func() ([]*v1.Service, error) {
		if !synced() {
			return nil, errors.New("services have not yet been read at least once, cannot construct envvars")
		}
		list, err := lister.List(labels.Everything())
		if err != nil {
			return nil, errors.New("failed to list services when setting up env vars")
		}
		return list, nil
	}
}

// published is engine.Config.PublishedPod; nil-safe so that runs without
// --kubeconfig pass a nil *apiClient's method value. A pod published
// before start is found by the status manager's first sweep.
func (a *apiClient) published(p *v1.Pod) {
	if a == nil {
		return
	}
	if st := a.status.Load(); st != nil {
		st.Published(p)
	}
}

// start runs the API pod source, the Node keeper and the status manager
// until ctx ends. None of them blocks the start: while the API server is
// unreachable they retry, and static pods run meanwhile.
func (a *apiClient) start(ctx context.Context, o *runOptions, nd *nodeResources, eng *engine.Engine, rt cri.Runtime, m *config.Merger, log *slog.Logger) {
	watch := config.StartAPI(ctx, config.APISource{Client: a.cs, NodeName: o.nodeName}, m, log)
	// daemonEndpoints.kubeletEndpoint: the kubelet API the API server
	// proxies logs, exec and port-forward to; the read-only port without it.
	port := int32(o.port)
	if port == 0 {
		port = int32(o.readOnlyPort)
	}
	n := node.New(node.Config{
		Client: a.cs, Name: o.nodeName, IP: eng.NodeIP(), Port: port, MaxPods: o.maxPods,
		Capacity: nd.capacity, Allocatable: o.node.allocatable, Extended: nd.extended(),
		RootDir: o.rootDir, Version: specletVersion(), Health: eng.Healthz, Pressure: eng.Pressure, Event: a.nodeEvent,
		LeaseDuration: secondsDuration(o.nodeLeaseDuration),
		StatusPeriod:  o.nodeStatusUpdate, ReportPeriod: o.nodeStatusReport,
		Runtime: func(ctx context.Context) (string, string, error) {
			v, err := rt.Version(ctx)
			if err != nil {
				return "", "", err
			}
			return v.GetRuntimeName(), v.GetRuntimeVersion(), nil
		},
		RuntimeFeatures: func() (*v1.NodeFeatures, []v1.NodeRuntimeHandler) { return eng.RuntimeFeatures().NodeStatus() },
		Log:             log,
	})
	a.node.Store(n)
	go n.Run(ctx)
	st := apistatus.New(apistatus.Config{Client: a.cs, Engine: eng, Pods: watch, NodeName: o.nodeName, NodeUID: n.UID, Log: log})
	a.status.Store(st)
	go st.Run(ctx)
	log.Info("joining the API server", "node", o.nodeName, "node-ip", eng.NodeIP(), "kubeconfig", o.kubeconfig)
}

func secondsDuration(s int) time.Duration { return time.Duration(s) * time.Second }
