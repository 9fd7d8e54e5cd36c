package engine

import (
	"os"
	"path/filepath"
	"slices"
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
		logDirs = e.logDirPaths(e.logDirNames()[uid])
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

// logDirNames lists <root>/logs by the UID each directory is named for:
// the names of each UID's directories, in name order (logDirPaths makes
// them paths, for the UIDs whose directories go).
func (e *Engine) logDirNames() map[types.UID][]string {
	names, err := readDirNames(e.logsDir())
	if err != nil {
		return nil
	}
	out := map[types.UID][]string{}
	for _, n := range names {
		if uid := logDirUID(n); uid != "" {
			out[uid] = append(out[uid], n)
		}
	}
	for _, ns := range out {
		if len(ns) > 1 {
			slices.Sort(ns)
		}
	}
	return out
}

func (e *Engine) logsDir() string { return filepath.Join(e.cfg.RootDir, "logs") }

// logDirPaths returns the paths of the log directories names (of
// logDirNames); nil for none.
func (e *Engine) logDirPaths(names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, filepath.Join(e.logsDir(), n))
	}
	return out
}

// readDirNames returns the names in dir, unsorted: the sweep reads every
// pod's entry each pass, and names alone cost neither a DirEntry nor a sort
// per entry.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
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
	if names, err := readDirNames(filepath.Join(root, "pods")); err == nil {
		for _, n := range names {
			uids[types.UID(n)] = true
		}
	}
	logs := e.logDirNames()
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
		e.removePodDirs(uid, e.logDirPaths(logs[uid]))
	}
}
