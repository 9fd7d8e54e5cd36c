package cgroupstats

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
)

// Finder maps container IDs to their cgroups (relative paths), walking the
// memory hierarchy (v1) or the unified one (v2) for IDs it has not seen. It
// is safe for concurrent use.
type Finder struct {
	Dirs Dirs
	mu   sync.Mutex
	path map[string]string
}

// Find returns the cgroup of each of ids that has one.
func (f *Finder) Find(ids []string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.path == nil {
		f.path = map[string]string{}
	}
	missing := map[string]bool{}
	for _, id := range ids {
		if _, ok := f.path[id]; !ok {
			missing[id] = true
		}
	}
	if len(missing) > 0 {
		ctrl := "memory"
		if f.Dirs.V2 {
			ctrl = ""
		}
		root := f.Dirs.Dir(ctrl, "/")
		if root != "" {
			filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
				if err != nil {
					if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
						return fs.SkipDir
					}
					return nil
				}
				if !e.IsDir() {
					return nil
				}
				name := e.Name()
				// systemd's driver names them cri-containerd-<id>.scope
				name = strings.TrimSuffix(name, ".scope")
				if i := strings.LastIndexByte(name, '-'); i >= 0 {
					name = name[i+1:]
				}
				if missing[name] {
					rel, _ := filepath.Rel(root, p)
					f.path[name] = "/" + rel
					delete(missing, name)
					if len(missing) == 0 {
						return fs.SkipAll
					}
					return fs.SkipDir
				}
				return nil
			})
		}
	}
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		if p, ok := f.path[id]; ok {
			out[id] = p
		}
	}
	return out
}

// Prune forgets every ID not in keep.
func (f *Finder) Prune(keep map[string]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.path {
		if !keep[id] {
			delete(f.path, id)
		}
	}
}
