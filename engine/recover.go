package engine

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/inbox"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/engine/worker"
)

// recover lists the runtime's sandboxes and containers and groups speclet's
// by pod UID. A pod whose UID a source declares again is adopted by its new
// worker (running containers keep running, nothing starts twice); the rest are
// orphans, stopped and removed once the sources have spoken.
func (e *Engine) recover(ctx context.Context) error {
	sbs, err := e.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	cs, err := e.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	pods := runtimepods.Group(sbs, cs)
	e.mu.Lock()
	e.adopted = pods
	// A pod that ran before the restart still holds its full name: a new
	// pod of the same name waits until it is adopted or stopped.
	for _, a := range pods {
		if a.ReadySandbox() != nil {
			e.names.Add(a.Name+"_"+a.Namespace, a.UID)
		}
	}
	e.mu.Unlock()
	e.pleg.Seed(sbs, cs)
	if len(pods) > 0 {
		e.log.Info("found pods in the runtime from a previous run", "pods", len(pods))
	}
	return nil
}

// cleanupOrphans kills the runtime pods no source declared, once the first
// config update is sourcesSettle old: a worker for each drives it through
// the same terminating path as a removed pod.
func (e *Engine) cleanupOrphans() {
	e.mu.Lock()
	if !e.sourcesReady() || len(e.adopted) == 0 {
		e.mu.Unlock()
		return
	}
	orphans := e.adopted
	e.adopted = map[types.UID]*worker.Adopted{}
	e.mu.Unlock()
	for _, a := range orphans {
		e.log.Info("stopping a pod no source declares", "pod", a.Namespace+"/"+a.Name, "uid", a.UID)
		e.mu.Lock()
		e.adopted[a.UID] = a
		e.mu.Unlock()
		pod := runtimepods.Orphan(a)
		if w := e.worker(a.UID, true, pod); w != nil {
			w.Post(worker.Input{Kind: inbox.Orphan, Pod: pod})
		}
	}
}
