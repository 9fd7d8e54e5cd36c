//go:build linux

package config

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watchInotify pokes ch (without blocking) whenever a file in dir is written,
// moved or removed, until the returned closer is closed. Only completed
// writes (IN_CLOSE_WRITE) count, so a manifest is not read half-written.
// The names of files removed or moved away go into removed before the poke.
func watchInotify(dir string, ch chan<- struct{}, removed *removedSet) (io.Closer, error) {
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
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			removed.add(removedNames(buf[:n]))
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return f, nil
}

// removedNames are the names of the files that the inotify events in buf
// report removed or moved away (IN_DELETE, IN_MOVED_FROM), which kubelet's
// file source takes for the removal of the manifest.
func removedNames(buf []byte) []string {
	var out []string
	for len(buf) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(buf) {
			break
		}
		if ev.Mask&(unix.IN_DELETE|unix.IN_MOVED_FROM) != 0 && ev.Len > 0 {
			out = append(out, strings.TrimRight(string(buf[unix.SizeofInotifyEvent:end]), "\x00"))
		}
		buf = buf[end:]
	}
	return out
}
