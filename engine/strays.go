package engine

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/runtimepods"
)

// This file finds strays: runtime pods that appear while speclet runs and
// that no worker owns, as kubelet's housekeeping kills the runtime pods it
// does not know. The one way speclet makes them: a RunPodSandbox whose
// reply was lost (a client timeout under load, a runtime restart) while the
// runtime went on to create the sandbox, and whose pod was removed before
// a retry found the name reserved and adopted it. No worker holds that
// sandbox's ID, so its removal stops nothing; without this sweep it stayed
// in the runtime, and its shim ran, until speclet restarted.

// strayRipe is how many consecutive housekeeping passes must see a UID in
// the PLEG's lists with no worker, adoption or source before it is treated
// as a stray: a purged pod's objects can linger in one relist taken while
// its removal ran.
const strayRipe = 3

// sweepStrays counts the UIDs of the PLEG's last relist that nobody owns
// and, once one is ripe, lists its objects afresh (off the loop) and hands
// them to cleanupOrphans as an adopted pod: a worker stops and removes them
// through the pod machine's terminating path.
func (e *Engine) sweepStrays(ctx context.Context) {
	if !e.recovered.Load() {
		return // recovery adopts what the runtime holds at the start
	}
	uids := e.pleg.UIDs()
	e.mu.Lock()
	next := map[types.UID]int{}
	var ripe []types.UID
	for uid := range uids {
		if e.workers[uid] != nil || e.adopted[uid] != nil || e.desired[uid] != nil {
			continue
		}
		next[uid] = e.strays[uid] + 1
		if next[uid] >= strayRipe {
			ripe = append(ripe, uid)
		}
	}
	e.strays = next
	e.mu.Unlock()
	if len(ripe) == 0 || !e.sweeping.CompareAndSwap(false, true) {
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer e.sweeping.Store(false)
		for _, uid := range ripe {
			if err := e.adoptStray(ctx, uid); err != nil {
				e.log.Warn("list a stray pod", "uid", uid, "err", err)
			}
		}
	}()
}

// adoptStray lists the sandboxes and containers of uid and, when nobody
// claimed the UID meanwhile, records them for cleanupOrphans.
//
// The objects are listed by speclet's pod UID label, then by kubelet's
// (runtimepods.KubeletPodUID) when none has speclet's: a pod kubelet
// started.
func (e *Engine) adoptStray(ctx context.Context, uid types.UID) error {
	var a *runtimepods.Pod
	for _, key := range []string{LabelPodUID, runtimepods.KubeletPodUID} {
		sel := map[string]string{key: string(uid)}
		sbs, err := e.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
		if err != nil {
			return err
		}
		cs, err := e.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
		if err != nil {
			return err
		}
		if a = runtimepods.Group(sbs, cs)[uid]; a != nil {
			break
		}
	}
	if a == nil {
		return nil // gone meanwhile
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.workers[uid] != nil || e.adopted[uid] != nil || e.desired[uid] != nil {
		return nil
	}
	e.log.Info("found a pod in the runtime that no worker owns", "pod", a.Namespace+"/"+a.Name, "uid", uid, "sandboxes", len(a.Sandboxes))
	e.adopted[uid] = a
	delete(e.strays, uid)
	return nil
}
