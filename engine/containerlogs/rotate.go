// Package containerlogs rotates container log files as kubelet's container
// log manager does (--container-log-max-size, --container-log-max-files):
// a running container's log at or above MaxSize is renamed to
// <log>.<YYYYMMDD-hhmmss> and the runtime reopens a new file at the path
// (CRI ReopenContainerLog); rotated files beyond MaxFiles-1 are deleted,
// oldest first, so that a container keeps at most MaxFiles files.
//
// ReopenContainerLog is the one mutating CRI call here. It is log
// maintenance, not a lifecycle effect (it changes the runtime's file handle,
// not the container), so it is not a spec action: RotateOnce is the handler
// rotate_once of caller log_rotation in spec/callers.hcl, which lists the
// CRI methods it may call, and its calls run under that handler's tag
// (fsm.Handler.Tag) for the CRI audit. Unlike kubelet, rotated files are
// not compressed.
//
// The same pass keeps the links log shippers tail (links.go): it links a
// running container seen for the first time, and sweeps the links that
// point at nothing, as kubelet's container GC does.
package containerlogs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/fsm"
)

// Runtime is the part of the CRI rotation uses.
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error)
	ReopenContainerLog(ctx context.Context, containerID string) error
}

// Rotator rotates the logs of the runtime's running containers.
type Rotator struct {
	Runtime  Runtime
	MaxSize  int64 // bytes; kubelet's default 10Mi
	MaxFiles int   // at least 2; kubelet's default 5
	Log      *slog.Logger
	Now      func() time.Time
	// LinkOf is the path of the link to a container's log file where log
	// shippers look ("": none for it), and LinksDir the directory of the
	// links; nil or "": no links are kept. A pass links each running
	// container it sees for the first time (one started before speclet
	// restarted, whose link was removed meanwhile) and removes the links
	// in LinksDir that point at nothing, but a running container's
	// (SweepLinks).
	LinkOf   func(c *runtimeapi.Container) string
	LinksDir string

	// paths is each running container's log path, by container ID, as
	// ContainerStatus gave it: a container's log path never changes, so a
	// pass asks the runtime only for the containers that started since the
	// last one. Pruned to the running containers every pass. Owned by the
	// goroutine calling RotateOnce.
	paths map[string]string
}

// DefaultPeriod is how often the logs are checked (kubelet's
// containerLogMonitorInterval).
const DefaultPeriod = 10 * time.Second

// timestampFormat names rotated files, as kubelet's.
const timestampFormat = "20060102-150405"

// Run rotates every period until ctx ends (kubelet checks every 10 s).
func (r *Rotator) Run(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if err := r.RotateOnce(ctx); err != nil && ctx.Err() == nil {
			r.log().Warn("container log rotation", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Rotator) log() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}

// RotateOnce checks each running container once. A container whose
// rotation fails is logged and the others go on.
func (r *Rotator) RotateOnce(ctx context.Context) error {
	if r.MaxFiles < 2 || r.MaxSize <= 0 {
		return fmt.Errorf("container log rotation: max files %d (want >= 2), max size %d (want > 0)", r.MaxFiles, r.MaxSize)
	}
	ctx = fsm.HandlerLogRotationRotateOnce.Tag(ctx)
	cs, err := r.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	paths := make(map[string]string, len(cs))
	var running map[string]bool // the running containers' links
	if r.LinkOf != nil {
		running = make(map[string]bool, len(cs))
	}
	for _, c := range cs {
		link := ""
		if r.LinkOf != nil {
			if link = r.LinkOf(c); link != "" {
				running[link] = true
			}
		}
		path, ok := r.paths[c.Id]
		if !ok {
			st, err := r.Runtime.ContainerStatus(ctx, c.Id)
			if err != nil {
				continue // asked again next pass
			}
			path = st.LogPath
			if link != "" && path != "" {
				if _, err := Link(link, path); err != nil {
					r.log().Warn("container log link", "container", c.GetMetadata().GetName(), "id", c.Id, "log", path, "err", err)
				}
			}
		}
		paths[c.Id] = path
		if path == "" {
			continue
		}
		if err := r.rotate(ctx, c.Id, path); err != nil {
			r.log().Warn("container log rotation", "container", c.GetMetadata().GetName(), "id", c.Id, "log", path, "err", err)
		}
	}
	r.paths = paths
	if r.LinkOf != nil && r.LinksDir != "" {
		removed, err := SweepLinks(r.LinksDir, func(l string) bool { return running[l] })
		for _, l := range removed {
			r.log().Debug("removed a dead container log link", "link", l)
		}
		if err != nil {
			r.log().Warn("container log links", "dir", r.LinksDir, "err", err)
		}
	}
	return nil
}

// rotate rotates one container's log when it reached MaxSize.
func (r *Rotator) rotate(ctx context.Context, id, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // not written yet
		}
		return err
	}
	if fi.Size() < r.MaxSize {
		return nil
	}
	// keep MaxFiles-2 rotated files: with the one made now and the new
	// current file, MaxFiles in all
	if err := removeOldest(path, r.MaxFiles-2); err != nil {
		return err
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	rotated := path + "." + now().Format(timestampFormat)
	if _, err := os.Stat(rotated); err == nil {
		return nil // rotated this second already: the next check does it
	}
	if err := os.Rename(path, rotated); err != nil {
		return fmt.Errorf("rename log: %w", err)
	}
	if err := r.Runtime.ReopenContainerLog(ctx, id); err != nil {
		// the runtime still writes to the renamed file: put it back
		if rerr := os.Rename(rotated, path); rerr != nil {
			return fmt.Errorf("reopen log: %w; and renaming it back: %v", err, rerr)
		}
		return fmt.Errorf("reopen log: %w", err)
	}
	return nil
}

// removeOldest deletes the rotated files of path beyond the newest keep.
func removeOldest(path string, keep int) error {
	matches, err := filepath.Glob(path + ".*")
	if err != nil {
		return err
	}
	var rotated []string
	for _, m := range matches {
		if !strings.HasSuffix(m, ".tmp") {
			rotated = append(rotated, m)
		}
	}
	sort.Strings(rotated) // oldest first
	for len(rotated) > keep {
		if err := os.Remove(rotated[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove rotated log: %w", err)
		}
		rotated = rotated[1:]
	}
	return nil
}
