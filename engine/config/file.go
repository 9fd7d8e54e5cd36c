package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DirSource is a directory of static pod manifests (kubelet's
// --pod-manifest-path): one v1 Pod per regular file, in YAML or JSON. Files
// whose names start with "." are ignored, and so are subdirectories.
//
// A manifest that cannot be used (it does not decode, is not a v1 Pod, fails
// validation, or clashes with another file's pod name or UID) is logged with
// its file and field and skipped; all other pods are unaffected. A file that
// was valid and becomes invalid keeps its last valid pod running until the
// file is fixed or removed: unlike kubelet, which drops the pod, speclet does
// not kill a running pod over a half-written or mistyped edit. Removing the
// file removes the pod.
//
// Limits: a file over MaxManifestBytes (10 MiB) is refused unread; a file
// holds one YAML document; a rescan reads only files whose mtime, size or
// inode changed; each problem is logged once, when its file changes (a
// clash between two files once, when it appears). The last valid pod lives in memory only: a daemon
// restarted while the file is invalid no longer declares the pod.
type DirSource struct {
	Dir      string
	NodeName string
	// Period is how often the directory is read even without inotify
	// events; 0 means 1 s.
	Period time.Duration
}

// fileEntry is what the scanner remembers about one file.
type fileEntry struct {
	stat fileStat
	sum  [sha256.Size]byte // digest of the content (the content itself is not kept: up to 10 MiB a file)
	good *v1.Pod           // last valid pod from this file, nil if never valid
	err  error             // the current content's problem, nil when valid
}

// fileStat identifies a file's version without reading it: a rescan reads
// only files whose stat changed.
type fileStat struct {
	mtime time.Time
	size  int64
	ino   uint64
}

func statOf(info fs.FileInfo) fileStat {
	return fileStat{mtime: info.ModTime(), size: info.Size(), ino: inodeOf(info)}
}

// dirScanner reads a manifest directory into a snapshot, remembering each
// file's content so that unchanged files are not decoded again and each
// problem is reported once per content.
type dirScanner struct {
	dir, nodeName string
	files         map[string]*fileEntry
	dirErr        string
	// clashes are the name and UID clashes last reported, so that each is
	// reported once, when it appears.
	clashes map[string]bool
	// pods is the snapshot last made from files; dirty is set when files
	// changed since. A scan that changes nothing returns pods again
	// instead of sorting, matching and allocating the same snapshot every
	// period.
	pods  []*v1.Pod
	dirty bool
	// present is scan's scratch set of the paths seen, cleared by each scan.
	present map[string]bool
	// trustKnown: the next scan takes a regular file it read before as
	// unchanged without a stat, as inotify reports what changes it (a
	// write closed, a move, a removal); new files, symlinks (whose target
	// inotify on the directory does not see) and removals are still found.
	trustKnown bool
}

func newDirScanner(dir, nodeName string) *dirScanner {
	return &dirScanner{dir: dir, nodeName: nodeName, files: map[string]*fileEntry{}, dirty: true, present: map[string]bool{}}
}

// scan reads the directory. It returns the snapshot (pods in file name
// order), whether anything changed since the last scan, and the problems
// found in files that changed since the last scan (new problems only). The
// snapshot's slice is shared with later scans until something changes: the
// caller must not modify it.
func (s *dirScanner) scan() (pods []*v1.Pod, changed bool, problems []error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		msg := fmt.Sprintf("read manifest directory %s: %v", s.dir, err)
		if msg != s.dirErr {
			problems = append(problems, errors.New(msg))
			s.dirErr = msg
		}
		if errors.Is(err, fs.ErrNotExist) {
			ents = nil // a missing directory declares no pods
		} else {
			// Keep the last snapshot: a transient error must not kill pods.
			return s.snapshot(&problems), false, problems
		}
	} else {
		s.dirErr = ""
	}
	present := s.present
	clear(present)
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(s.dir, name)
		if s.trustKnown && e.Type().IsRegular() && s.files[path] != nil {
			present[path] = true
			continue
		}
		info, err := os.Stat(path) // follows symlinks, as kubelet does
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		st := statOf(info)
		prev := s.files[path]
		if prev != nil && prev.stat == st {
			present[path] = true
			continue // unchanged since the last scan: not read again
		}
		if info.Size() > MaxManifestBytes {
			present[path] = true
			changed = true
			ent := &fileEntry{stat: st, err: &ManifestError{Origin: path, Msg: fmt.Sprintf("%d bytes, more than the %d bytes (10 MiB) a manifest may have; not read", info.Size(), MaxManifestBytes)}}
			if prev != nil {
				ent.good = prev.good
			}
			problems = append(problems, ent.err)
			if ent.good != nil {
				problems = append(problems, keepingErr(path, ent.good))
			}
			s.files[path] = ent
			continue
		}
		data, err := readLimited(path, MaxManifestBytes)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed while we read
			}
			if prev != nil {
				present[path] = true
			}
			problems = append(problems, fmt.Errorf("read manifest %s: %w", path, err))
			continue
		}
		present[path] = true
		sum := sha256.Sum256(data)
		if prev != nil && prev.sum == sum {
			prev.stat = st // touched, not changed
			continue
		}
		changed = true
		ent := &fileEntry{stat: st, sum: sum}
		if prev != nil {
			ent.good = prev.good
		}
		pod, err := s.decode(path, data)
		if err != nil {
			ent.err = err
			problems = append(problems, err)
			if ent.good != nil {
				problems = append(problems, keepingErr(path, ent.good))
			}
		} else {
			ent.good = pod
		}
		s.files[path] = ent
	}
	for path := range s.files {
		if !present[path] {
			delete(s.files, path)
			changed = true
		}
	}
	if changed {
		s.dirty = true
	}
	return s.snapshot(&problems), changed, problems
}

func keepingErr(path string, good *v1.Pod) error {
	return fmt.Errorf("manifest %s: keeping its last valid pod %s/%s (uid %s) until the file is fixed or removed", path, good.Namespace, good.Name, good.UID)
}

// readLimited reads path, failing when it holds more than limit bytes (it
// may have grown since its stat).
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("more than the %d bytes (10 MiB) a manifest may have", limit)
	}
	return data, nil
}

func (s *dirScanner) decode(path string, data []byte) (*v1.Pod, error) {
	pod, err := decodePod(data, path)
	if err != nil {
		return nil, err
	}
	return staticPod(pod, SourceFile, path, path, s.nodeName)
}

// snapshot returns the pods of the remembered files in path order; of two
// files with the same pod full name or UID, the first in path order wins and
// the other is reported once, when the clash appears (again after it was
// resolved and came back). Unless files changed since the last snapshot
// (dirty), it returns that snapshot again: the same files make the same pods
// and the same clashes, which were reported then.
func (s *dirScanner) snapshot(problems *[]error) []*v1.Pod {
	if !s.dirty {
		return s.pods
	}
	clashes := map[string]bool{}
	defer func() { s.clashes = clashes }()
	report := func(err error) {
		msg := err.Error()
		clashes[msg] = true
		if !s.clashes[msg] {
			*problems = append(*problems, err)
		}
	}
	paths := make([]string, 0, len(s.files))
	for p := range s.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	byName := map[string]string{}
	byUID := map[types.UID]string{}
	var pods []*v1.Pod
	for _, path := range paths {
		p := s.files[path].good
		if p == nil {
			continue
		}
		full := p.Namespace + "/" + p.Name
		if other, dup := byName[full]; dup {
			report(&ManifestError{Origin: path, Field: "metadata.name", Msg: fmt.Sprintf("pod %s is already declared by %s; skipped", full, other)})
			continue
		}
		if other, dup := byUID[p.UID]; dup {
			report(&ManifestError{Origin: path, Field: "metadata.uid", Msg: fmt.Sprintf("uid %s is already used by %s; skipped", p.UID, other)})
			continue
		}
		byName[full], byUID[p.UID] = path, path
		pods = append(pods, p)
	}
	s.pods, s.dirty = pods, false
	return pods
}

// WatchDir feeds the Merger with the snapshots of src until ctx ends: at
// once, then on every inotify event in the directory (when inotify is
// available) and every Period. Problems are logged once per file content.
//
// With inotify, a periodic scan lists the directory and stats only what
// inotify may miss (new files, symlinks); a regular file it knows is read
// again at an inotify event and at least every fullScanEvery. Without
// inotify every scan stats every file. A file unchanged since its last
// read (same mtime, size and inode) is never read again.
func WatchDir(ctx context.Context, src DirSource, m *Merger, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	period := src.Period
	if period <= 0 {
		period = time.Second
	}
	poke := make(chan struct{}, 1)
	removed := &removedSet{}
	inotify := true
	if w, err := watchInotify(src.Dir, poke, removed); err != nil {
		inotify = false
		log.Info("manifest directory: no inotify, polling", "dir", src.Dir, "period", period, "err", err)
	} else {
		defer w.Close()
	}
	sc := newDirScanner(src.Dir, src.NodeName)
	tick := time.NewTicker(period)
	defer tick.Stop()
	first := true
	lastFull := time.Now()
	for {
		if !sc.trustKnown {
			lastFull = time.Now()
		}
		if gone := removed.take(); len(gone) > 0 {
			// A manifest removed counts as removed even when it is
			// back by this scan (rm, then the same file written
			// again): its pod goes first, and the scan declares it
			// again, as kubelet's file source sees the two events.
			if pods, changed := sc.forget(gone); changed {
				if err := m.Set(ctx, SourceFile, pods); err != nil {
					return err
				}
			}
		}
		pods, changed, problems := sc.scan()
		for _, p := range problems {
			log.Error("manifest skipped", "source", SourceFile, "err", p)
		}
		if changed || first {
			if err := m.Set(ctx, SourceFile, pods); err != nil {
				return err
			}
			first = false
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			sc.trustKnown = inotify && time.Since(lastFull) < fullScanEvery
		case <-poke:
			sc.trustKnown = false
		}
	}
}

// removedSet holds the names of manifests inotify reported removed since
// WatchDir last took them.
type removedSet struct {
	mu    sync.Mutex
	names []string
}

func (r *removedSet) add(names []string) {
	if len(names) == 0 {
		return
	}
	r.mu.Lock()
	r.names = append(r.names, names...)
	r.mu.Unlock()
}

func (r *removedSet) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.names
	r.names = nil
	return out
}

// forget drops the files of names (in the scanner's directory) that it
// knows, so that the next scan reads them afresh, and returns the snapshot
// without them; changed is false when it knew none of them.
func (s *dirScanner) forget(names []string) (pods []*v1.Pod, changed bool) {
	for _, n := range names {
		path := filepath.Join(s.dir, n)
		if s.files[path] != nil {
			delete(s.files, path)
			s.dirty, changed = true, true
		}
	}
	if !changed {
		return nil, false
	}
	var problems []error // reported by the scan that follows
	return s.snapshot(&problems), true
}

// fullScanEvery is how often WatchDir stats every file even when inotify
// reports changes: kubelet's default --file-check-frequency, so that with
// that period every scan is a full one.
const fullScanEvery = 20 * time.Second
