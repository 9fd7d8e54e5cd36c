//go:build linux

package config

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// watchInotify pokes ch (without blocking) whenever a file in dir is written,
// moved or removed, until the returned closer is closed. Only completed
// writes (IN_CLOSE_WRITE) count, so a manifest is not read half-written.
func watchInotify(dir string, ch chan<- struct{}) (io.Closer, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify init: %w", err)
	}
	const mask = unix.IN_CLOSE_WRITE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_DELETE |
		unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	if _, err := unix.InotifyAddWatch(fd, dir, mask); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("inotify watch %s: %w", dir, err)
	}
	// A non-blocking descriptor wrapped by os.NewFile uses the runtime
	// poller, so Close unblocks the reader below.
	f := os.NewFile(uintptr(fd), "inotify:"+dir)
	go func() {
		buf := make([]byte, 64*1024)
		for {
			if _, err := f.Read(buf); err != nil {
				return
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return f, nil
}
