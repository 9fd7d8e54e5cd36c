package volume

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// File is one file of a volume's payload: its content and permission bits.
type File struct {
	Data []byte
	Mode os.FileMode
}

const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
)

// AtomicWriter writes a payload (relative path -> File) into a directory
// so that a reader sees either the whole old payload or the whole new one,
// never a mix, as kubelet's AtomicWriter:
//
//  1. the payload is written into a new hidden directory named after the
//     time, "..2006_01_02_15_04_05.<random>";
//  2. a symlink "..data_tmp" to it is renamed over "..data" (rename(2) is
//     atomic);
//  3. every top-level name of the payload is a symlink "<name>" ->
//     "..data/<name>", created once; names no longer in the payload lose
//     their symlink;
//  4. the previous timestamped directory is removed.
//
// Write does nothing when the payload equals what ..data holds.
type AtomicWriter struct {
	Dir string
	Now func() time.Time // nil: time.Now
}

// Write makes Dir hold payload. Paths must be relative, clean, without
// ".." elements and not start with "..".
func (w *AtomicWriter) Write(payload map[string]File) error {
	for p := range payload {
		if err := ValidatePath(p); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(w.Dir, 0o755); err != nil {
		return fmt.Errorf("create volume directory: %w", err)
	}
	oldTS, _ := os.Readlink(filepath.Join(w.Dir, dataDirName))
	if oldTS != "" && w.same(filepath.Join(w.Dir, oldTS), payload) {
		return nil
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	tsDir, err := os.MkdirTemp(w.Dir, now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return fmt.Errorf("create timestamped directory: %w", err)
	}
	if err := writePayload(tsDir, payload); err != nil {
		os.RemoveAll(tsDir)
		return err
	}
	if err := os.Chmod(tsDir, 0o755); err != nil {
		os.RemoveAll(tsDir)
		return fmt.Errorf("chmod timestamped directory: %w", err)
	}
	tmp := filepath.Join(w.Dir, newDataDirName)
	os.Remove(tmp)
	if err := os.Symlink(filepath.Base(tsDir), tmp); err != nil {
		os.RemoveAll(tsDir)
		return fmt.Errorf("create %s symlink: %w", newDataDirName, err)
	}
	if err := os.Rename(tmp, filepath.Join(w.Dir, dataDirName)); err != nil {
		os.Remove(tmp)
		os.RemoveAll(tsDir)
		return fmt.Errorf("swap %s symlink: %w", dataDirName, err)
	}
	if err := w.linkUserVisible(payload); err != nil {
		return err
	}
	if err := w.removeStale(payload); err != nil {
		return err
	}
	if oldTS != "" && oldTS != filepath.Base(tsDir) {
		if err := os.RemoveAll(filepath.Join(w.Dir, oldTS)); err != nil {
			return fmt.Errorf("remove old timestamped directory: %w", err)
		}
	}
	return nil
}

// ValidatePath checks a payload path (an item's path) as kubelet does.
func ValidatePath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("invalid path: must not be empty")
	case filepath.IsAbs(p):
		return fmt.Errorf("invalid path %q: must be relative", p)
	case len(p) > 4096:
		return fmt.Errorf("invalid path %q: longer than 4096 characters", p)
	case strings.HasPrefix(p, ".."):
		return fmt.Errorf("invalid path %q: must not start with '..'", p)
	}
	for _, el := range strings.Split(p, string(os.PathSeparator)) {
		if el == ".." {
			return fmt.Errorf("invalid path %q: must not contain '..'", p)
		}
	}
	return nil
}

// same reports whether dir holds exactly payload.
func (w *AtomicWriter) same(dir string, payload map[string]File) bool {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		f, ok := payload[rel]
		if !ok {
			return errDiffers
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm() != f.Mode.Perm() {
			return errDiffers
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, f.Data) {
			return errDiffers
		}
		n++
		return nil
	})
	return err == nil && n == len(payload)
}

var errDiffers = fmt.Errorf("payload differs")

func writePayload(dir string, payload map[string]File) error {
	for p, f := range payload {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("create directory of %q: %w", p, err)
		}
		if err := os.WriteFile(full, f.Data, f.Mode.Perm()); err != nil {
			return fmt.Errorf("write %q: %w", p, err)
		}
		// WriteFile's mode is subject to the umask; set it exactly.
		if err := os.Chmod(full, f.Mode.Perm()); err != nil {
			return fmt.Errorf("chmod %q: %w", p, err)
		}
	}
	return nil
}

// topLevel returns the sorted first path elements of payload.
func topLevel(payload map[string]File) []string {
	set := map[string]bool{}
	for p := range payload {
		set[strings.SplitN(p, string(os.PathSeparator), 2)[0]] = true
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (w *AtomicWriter) linkUserVisible(payload map[string]File) error {
	for _, name := range topLevel(payload) {
		link := filepath.Join(w.Dir, name)
		target := filepath.Join(dataDirName, name)
		if cur, err := os.Readlink(link); err == nil && cur == target {
			continue
		}
		os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return fmt.Errorf("create symlink %q: %w", name, err)
		}
	}
	return nil
}

// removeStale removes the user-visible symlinks of names no longer in the
// payload. Hidden entries (..data, timestamped directories) are kept.
func (w *AtomicWriter) removeStale(payload map[string]File) error {
	keep := map[string]bool{}
	for _, n := range topLevel(payload) {
		keep[n] = true
	}
	ents, err := os.ReadDir(w.Dir)
	if err != nil {
		return fmt.Errorf("read volume directory: %w", err)
	}
	for _, ent := range ents {
		name := ent.Name()
		if strings.HasPrefix(name, "..") || keep[name] {
			continue
		}
		if ent.Type()&os.ModeSymlink == 0 {
			continue // not ours
		}
		if err := os.Remove(filepath.Join(w.Dir, name)); err != nil {
			return fmt.Errorf("remove stale symlink %q: %w", name, err)
		}
	}
	return nil
}
