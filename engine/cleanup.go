package engine

import (
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/volume"
)

// This file removes the directories of pods that are gone, as kubelet's
// cleanupOrphanedPodDirs and its log GC do: <root>/pods/<uid> (emptyDir
// volumes) and <root>/logs/<namespace>_<name>_<uid> (container logs).
// A pod's directories go when its worker is purged after the pod machine
// finished (nothing of the pod is left in the runtime), so a pod declared
// again with the same UID starts with fresh emptyDirs; and housekeeping
// sweeps the directories of UIDs no worker, source or runtime object knows
// (pods removed while speclet was down). The directories of a pod that still
// runs, or that a source declares, are never touched. The same sweep
// removes the pod cgroups (Config.PodCgroups) of such UIDs: a removal that
// failed in the sandbox machine's remove_pod_cgroup, or a pod removed while
// speclet was down.

// removePodDirs removes the directories of pod uid: <root>/pods/<uid> and
// its log directories logDirs (nil: those of <root>/logs named for uid,
// found by listing it, which costs a read of every pod's entry).
func (e *Engine) removePodDirs(uid types.UID, logDirs []string) {
	root := e.cfg.RootDir
	if logDirs == nil {
		logDirs = e.logDirs()[uid]
	}
	paths := append([]string{filepath.Join(root, "pods", string(uid))}, logDirs...)
	if err := volume.UnmountAll(paths[0]); err != nil {
		// Never remove through a mount that stayed: retried at the next sweep.
		e.log.Warn("unmount volumes of a removed pod", "uid", uid, "err", err)
		paths = paths[1:]
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			e.log.Warn("remove directory of a removed pod", "uid", uid, "dir", p, "err", err)
			continue
		}
		e.log.Debug("removed directory of a removed pod", "uid", uid, "dir", p)
	}
}

// logDirs lists <root>/logs by the UID each directory is named for.
func (e *Engine) logDirs() map[types.UID][]string {
	dir := filepath.Join(e.cfg.RootDir, "logs")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[types.UID][]string{}
	for _, ent := range ents {
		if uid := logDirUID(ent.Name()); uid != "" {
			out[uid] = append(out[uid], filepath.Join(dir, ent.Name()))
		}
	}
	return out
}

// logDirUID returns the UID of a log directory <namespace>_<name>_<uid>.
func logDirUID(name string) types.UID {
	i := strings.LastIndexByte(name, '_')
	if i < 0 {
		return ""
	}
	return types.UID(name[i+1:])
}

// cleanupPodDirs removes the directories of UIDs that no worker, no
// source and no runtime object knows. It runs once the state was rebuilt
// from the runtime and the sources have spoken, like orphan cleanup.
func (e *Engine) cleanupPodDirs() {
	if !e.recovered.Load() {
		return
	}
	root := e.cfg.RootDir
	uids := map[types.UID]bool{}
	if ents, err := os.ReadDir(filepath.Join(root, "pods")); err == nil {
		for _, ent := range ents {
			uids[types.UID(ent.Name())] = true
		}
	}
	logs := e.logDirs()
	for uid := range logs {
		uids[uid] = true
	}
	inRuntime := e.pleg.Known()
	cgroupUIDs := map[types.UID]bool{}
	if pc := e.cfg.PodCgroups; pc != nil {
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
		e.removePodDirs(uid, logs[uid])
	}
}
