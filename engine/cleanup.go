package engine

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/poddirs"
)

// This file decides when the directories of pods that are gone are
// removed (engine/poddirs removes them, as kubelet's cleanupOrphanedPodDirs
// and its log GC do: <root>/pods/<uid>, <pod-logs-dir>/<namespace>_<name>_<uid>
// and the links into it).
// A pod's directories go when its worker is purged after the pod machine
// finished (nothing of the pod is left in the runtime), so a pod declared
// again with the same UID starts with fresh emptyDirs; and housekeeping
// sweeps the directories of UIDs no worker, source or runtime object knows
// (pods removed while speclet was down). The directories of a pod that still
// runs, or that a source declares, are never touched. The same sweep
// removes the pod cgroups (Config.PodCgroups) of such UIDs: a removal that
// failed in the sandbox machine's remove_pod_cgroup, or a pod removed while
// speclet was down.

// podCgroupSweepPeriod is how often housekeeping lists the pod cgroups.
// A listing reads the QoS directories in every hierarchy (30 on cgroup
// v1), and at every 2 s pass it was the largest part of an idle node's CPU
// (docs/performance.md). The sweep only catches what the sandbox
// machine's remove_pod_cgroup left (a failure) or a pod removed while
// speclet was down, and lists a cgroup only once it is a minute old
// (cgroups.Manager.Pods): 20 s more of delay loses nothing.
const podCgroupSweepPeriod = 20 * time.Second

// cleanupPodDirs removes the directories of UIDs that no worker, no
// source and no runtime object knows. It runs once the state was rebuilt
// from the runtime and the sources have spoken, like orphan cleanup.
func (e *Engine) cleanupPodDirs() {
	if !e.recovered.Load() {
		return
	}
	dirs := e.podDirs()
	found := dirs.List()
	uids := map[types.UID]bool{}
	for uid := range found {
		uids[uid] = true
	}
	inRuntime := e.pleg.Known()
	cgroupUIDs := map[types.UID]bool{}
	if pc, now := e.cfg.PodCgroups, e.clock.Now(); pc != nil && !now.Before(e.cgroupSweep) {
		e.cgroupSweep = now.Add(podCgroupSweepPeriod)
		// A pod the runtime still holds keeps its cgroup: not listed.
		list, err := pc.Pods(func(uid types.UID) bool { return inRuntime[uid] })
		if err != nil {
			e.log.Warn("list pod cgroups", "err", err)
		}
		for _, uid := range list {
			uids[uid] = true
			cgroupUIDs[uid] = true
		}
	}
	if len(uids) == 0 {
		return
	}
	// Held while removing: a new worker (which creates its directories)
	// needs the write lock, so it cannot appear meanwhile.
	e.mu.RLock()
	defer e.mu.RUnlock()
	if !e.sourcesReady() {
		return
	}
	for uid := range uids {
		if uid == "" || inRuntime[uid] || e.workers[uid] != nil || e.desired[uid] != nil || e.adopted[uid] != nil {
			continue
		}
		if cgroupUIDs[uid] {
			if err := e.cfg.PodCgroups.Remove(uid); err != nil {
				e.log.Warn("remove cgroup of a pod that is gone", "uid", uid, "err", err)
			} else {
				e.log.Info("removed cgroup of a pod that is gone", "uid", uid)
			}
		}
		e.log.Info("removing directories of a pod that is gone", "uid", uid)
		dirs.RemoveListed(found, uid)
		e.releaseUserNamespace(uid)
	}
}

// podDirs is the directories of the pods under --root-dir (engine/poddirs).
func (e *Engine) podDirs() poddirs.Dirs {
	return poddirs.Dirs{Root: e.cfg.RootDir, LogsDir: e.cfg.PodLogsDir, LinksDir: e.cfg.ContainerLogLinksDir, Log: e.log}
}
