// Package poddirs owns the directories a pod has on the node, laid out as
// kubelet lays them out: <root>/pods/<uid> (the pod's volumes, emptyDirs
// among them) and <pod-logs-dir>/<namespace>_<name>_<uid> (its containers'
// logs, the sandbox's LogDirectory), with the links to its log files in
// the links directory (/var/log/containers). It removes them as kubelet's
// cleanupOrphanedPodDirs and its log GC do; which pods are gone is the
// caller's to say.
package poddirs

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/containerlogs"
	"github.com/speclet/speclet/engine/volume"
)

// Dirs is the directories of the pods under Root (--root-dir) and
// LogsDir (--pod-logs-dir; "": <Root>/logs), and the links to their log
// files in LinksDir ("": none).
type Dirs struct {
	Root     string
	LogsDir  string
	LinksDir string
	Log      *slog.Logger
}

// Listing maps each UID that has a directory to the names of its log
// directories in the pod logs directory, in name order (none: only
// <root>/pods/<uid>).
type Listing map[types.UID][]string

// List lists the UIDs that have a directory under <root>/pods or a log
// directory in the pod logs directory. It reads the names of both directories
// only: the sweep runs every housekeeping pass over every pod's entry.
func (d Dirs) List() Listing {
	out := Listing(d.logDirNames())
	if out == nil {
		out = Listing{}
	}
	if names, err := readDirNames(filepath.Join(d.Root, "pods")); err == nil {
		for _, n := range names {
			if _, ok := out[types.UID(n)]; !ok {
				out[types.UID(n)] = nil
			}
		}
	}
	return out
}

// Remove removes the directories of pod uid: <root>/pods/<uid> and its log
// directories logDirs (nil: those of the pod logs directory named for uid,
// found by listing it, which costs a read of every pod's entry), and the
// links into them.
func (d Dirs) Remove(uid types.UID, logDirs []string) {
	if logDirs == nil {
		logDirs = d.logDirPaths(d.logDirNames()[uid])
	}
	d.remove(uid, logDirs)
}

// RemoveListed removes the directories of pod uid that l, a List, found.
func (d Dirs) RemoveListed(l Listing, uid types.UID) { d.remove(uid, d.logDirPaths(l[uid])) }

// remove removes <root>/pods/<uid>, the log directories logDirs and the
// links into them. It never removes through a mount that stayed under the
// pod's directory: that directory stays, for the next sweep. A failure is
// logged, not returned: the sweep tries again (a link left behind points
// at nothing, and the log maintenance removes it: containerlogs.SweepLinks).
func (d Dirs) remove(uid types.UID, logDirs []string) {
	if d.LinksDir != "" && len(logDirs) > 0 {
		removed, err := containerlogs.RemoveLinks(d.LinksDir, func(_, target string) bool { return within(target, logDirs) })
		if err != nil {
			d.Log.Warn("remove log links of a removed pod", "uid", uid, "dir", d.LinksDir, "err", err)
		}
		for _, l := range removed {
			d.Log.Debug("removed log link of a removed pod", "uid", uid, "link", l)
		}
	}
	paths := append([]string{filepath.Join(d.Root, "pods", string(uid))}, logDirs...)
	if err := volume.UnmountAll(paths[0]); err != nil {
		d.Log.Warn("unmount volumes of a removed pod", "uid", uid, "err", err)
		paths = paths[1:]
	}
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			d.Log.Warn("remove directory of a removed pod", "uid", uid, "dir", p, "err", err)
			continue
		}
		d.Log.Debug("removed directory of a removed pod", "uid", uid, "dir", p)
	}
}

// logDirNames lists the pod logs directory by the UID each directory is named for:
// the names of each UID's directories, in name order.
func (d Dirs) logDirNames() map[types.UID][]string {
	names, err := readDirNames(d.logsDir())
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

func (d Dirs) logsDir() string {
	if d.LogsDir == "" {
		return filepath.Join(d.Root, "logs")
	}
	return d.LogsDir
}

// logDirPaths returns the paths of the log directories names.
func (d Dirs) logDirPaths(names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, filepath.Join(d.logsDir(), n))
	}
	return out
}

// readDirNames returns the names in dir, unsorted: names alone cost
// neither a DirEntry nor a sort per entry.
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

// within reports whether path lies under one of dirs.
func within(path string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(path, filepath.Clean(d)+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
