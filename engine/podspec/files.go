package podspec

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// This file holds the file system work of a pod start, made with as few
// system calls as the common case allows: a burst of pods writes a hosts
// file per container and a log directory per sandbox.

// EnsureDir makes dir with perm, and its parents like os.MkdirAll, with the
// same result: nil when dir exists as a directory afterwards. The common
// case, a new directory in an existing parent, costs one mkdir(2) instead of
// os.MkdirAll's two stat(2) and a mkdir(2); any other outcome is
// os.MkdirAll's.
func EnsureDir(dir string, perm fs.FileMode) error {
	if os.Mkdir(dir, perm) == nil {
		return nil
	}
	return os.MkdirAll(dir, perm)
}

// writeFileMode writes data to file (created or truncated) and sets its
// mode to perm whatever the umask and whatever mode an existing file had,
// as os.WriteFile followed by os.Chmod; a missing parent directory is made
// (EnsureDir with dirPerm) only when the first open says it is missing, so
// the second and later containers of a pod pay no directory check.
func writeFileMode(file string, data []byte, perm, dirPerm fs.FileMode) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if errors.Is(err, fs.ErrNotExist) {
		if err := EnsureDir(filepath.Dir(file), dirPerm); err != nil {
			return err
		}
		f, err = os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// nodeFiles keeps the content of the node's files read for every container
// (the hosts file of hostNetwork pods), each read again when a stat(2) of
// its path shows another file or a change (inode, size or modification
// time).
var nodeFiles = fileCache{m: map[string]cachedFile{}}

type fileCache struct {
	mu sync.Mutex
	m  map[string]cachedFile
}

type cachedFile struct {
	id   fileID
	data []byte // read-only: shared by every reader
}

// fileID tells one version of a file from another: its inode, size and
// modification time.
type fileID struct {
	dev, ino uint64
	size     int64
	mtime    time.Time
}

func idOf(fi fs.FileInfo) fileID {
	id := fileID{size: fi.Size(), mtime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), uint64(st.Ino)
	}
	return id
}

// read returns the content of path, read-only: from the cache when path
// still names the file read last, else read now (and kept).
func (c *fileCache) read(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	id := idOf(fi)
	c.mu.Lock()
	f, ok := c.m[path]
	c.mu.Unlock()
	if ok && f.id == id {
		return f.data, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// Kept only when the file did not change while it was read.
	if fi, err := os.Stat(path); err == nil && idOf(fi) == id {
		c.mu.Lock()
		c.m[path] = cachedFile{id: id, data: data}
		c.mu.Unlock()
	}
	return data, nil
}
