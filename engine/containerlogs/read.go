// Reading container log files in the CRI format, with their rotated files:
// what /containerLogs serves and the tail a termination message falls back to.

package containerlogs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// ReadOptions are the query parameters of /containerLogs, as kubelet reads
// them (v1.PodLogOptions).
type ReadOptions struct {
	Follow     bool
	Previous   bool
	Timestamps bool
	TailLines  *int64
	LimitBytes *int64
	Since      time.Time // zero: from the start
}

// logEntry is one line of a CRI log file:
//
//	2016-10-06T00:17:09.669794202Z stdout F log content
//
// F ends a line, P is a part of a longer line (the runtime split it).
type logEntry struct {
	ts      time.Time
	stream  string
	partial bool
	content []byte
}

func parseCRILine(line []byte) (logEntry, error) {
	var e logEntry
	fields := bytes.SplitN(line, []byte{' '}, 4)
	if len(fields) < 3 {
		return e, fmt.Errorf("CRI log line %q: want <time> <stream> <tag> <content>", truncate(line))
	}
	ts, err := time.Parse(time.RFC3339Nano, string(fields[0]))
	if err != nil {
		return e, fmt.Errorf("CRI log line %q: time: %w", truncate(line), err)
	}
	e.ts, e.stream = ts, string(fields[1])
	e.partial = bytes.HasPrefix(fields[2], []byte("P"))
	if len(fields) == 4 {
		e.content = fields[3]
	}
	return e, nil
}

func truncate(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}

// logFiles returns the files of a container log, oldest first: the files
// rotated away (path.<timestamp>, not the compressed .gz ones) and path.
func logFiles(path string) []string {
	rotated, _ := filepath.Glob(path + ".*")
	var files []string
	for _, f := range rotated {
		if !strings.HasSuffix(f, ".gz") && !strings.HasSuffix(f, ".tmp") {
			files = append(files, f)
		}
	}
	sort.Strings(files) // <path>.YYYYMMDD-hhmmss sorts by time
	return append(files, path)
}

// logWriter writes entries as kubelet does: the content with timestamps
// optionally prefixed, at most limit bytes, skipping entries before since.
type logWriter struct {
	w          io.Writer
	flush      func()
	timestamps bool
	since      time.Time
	remaining  int64 // < 0: unlimited
}

var errLimitReached = errors.New("limitBytes reached")

func (lw *logWriter) write(e logEntry) error {
	if !lw.since.IsZero() && e.ts.Before(lw.since) {
		return nil
	}
	var out []byte
	if lw.timestamps {
		out = append(out, e.ts.Format(time.RFC3339Nano)...)
		out = append(out, ' ')
	}
	out = append(out, e.content...)
	if !e.partial {
		out = append(out, '\n')
	}
	if lw.remaining >= 0 {
		if int64(len(out)) >= lw.remaining {
			out = out[:lw.remaining]
			lw.remaining = 0
			if _, err := lw.w.Write(out); err != nil {
				return err
			}
			return errLimitReached
		}
		lw.remaining -= int64(len(out))
	}
	_, err := lw.w.Write(out)
	return err
}

// ContainerRunning says whether a container still runs; follow stops once
// it does not and its log has nothing more.
type ContainerRunning func(ctx context.Context) bool

// Stream writes the container log at path (with its rotated files) to w
// as o asks. With Follow, it waits for new lines until ctx ends or running
// says the container stopped and the file has nothing new.
func Stream(ctx context.Context, path string, o ReadOptions, w io.Writer, flush func(), running ContainerRunning) error {
	lw := &logWriter{w: w, flush: flush, timestamps: o.Timestamps, since: o.Since, remaining: -1}
	if o.LimitBytes != nil {
		lw.remaining = *o.LimitBytes
	}
	files := logFiles(path)
	skip := int64(0) // complete lines to skip from the start, for tailLines
	if o.TailLines != nil {
		total, err := countLines(files)
		if err != nil {
			return err
		}
		if total > *o.TailLines {
			skip = total - *o.TailLines
		}
	}
	for i, f := range files {
		last := i == len(files)-1
		fh, err := os.Open(f)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && !last {
				continue // rotated away meanwhile
			}
			return fmt.Errorf("open container log: %w", err)
		}
		err = copyEntries(ctx, fh, lw, &skip, last && o.Follow, path, running)
		if errors.Is(err, errLimitReached) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// countLines counts the complete log lines (F entries) in files.
func countLines(files []string) (int64, error) {
	var n int64
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return 0, fmt.Errorf("open container log: %w", err)
		}
		r := bufio.NewReaderSize(fh, 64<<10)
		for {
			line, err := r.ReadSlice('\n')
			if len(line) > 0 && line[len(line)-1] == '\n' {
				if e, perr := parseCRILine(bytes.TrimSuffix(line, []byte{'\n'})); perr == nil && !e.partial {
					n++
				}
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				break
			}
		}
		fh.Close()
	}
	return n, nil
}

// followPoll is how often a followed log is checked for new lines.
const followPoll = 100 * time.Millisecond

// copyEntries writes the entries of fh and closes it, skipping the first
// *skip complete lines. With follow, at the end of the file it waits for
// more: once the runtime rotated the log (path names a new file, which the
// runtime creates only after it stopped writing the old one), it reads the
// old file to its end, then goes on with the new one; it returns once
// running reports the container stopped and nothing new came.
func copyEntries(ctx context.Context, fh *os.File, lw *logWriter, skip *int64, follow bool, path string, running ContainerRunning) error {
	var next *os.File // the new file at path, read once fh is drained
	defer func() {
		fh.Close()
		if next != nil {
			next.Close()
		}
	}()
	r := bufio.NewReaderSize(fh, 64<<10)
	var pending []byte
	idle := 0
	for {
		chunk, err := r.ReadSlice('\n')
		pending = append(pending, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == nil {
			idle = 0
			line := bytes.TrimSuffix(pending, []byte{'\n'})
			pending = pending[:0]
			e, perr := parseCRILine(line)
			if perr != nil {
				continue // kubelet skips lines it cannot parse too
			}
			if *skip > 0 {
				if !e.partial {
					*skip--
				}
				continue
			}
			if werr := lw.write(e); werr != nil {
				return werr
			}
			continue
		}
		if err != io.EOF {
			return fmt.Errorf("read container log: %w", err)
		}
		if !follow {
			return nil
		}
		if next != nil {
			// the old file is read to its end: the runtime writes
			// whole lines, so what is pending was never completed
			fh.Close()
			fh, next = next, nil
			r.Reset(fh)
			pending = pending[:0]
			continue
		}
		// At the end: flush, then wait for more, a rotation, or the end.
		if lw.flush != nil {
			lw.flush()
		}
		if rotated(fh, path) {
			if nf, oerr := os.Open(path); oerr == nil {
				next = nf // first what the old file got after our last read
				continue
			}
		}
		idle++
		if idle%10 == 0 && running != nil && !running(ctx) {
			// one more read catches the last lines written before the exit
			if more, _ := r.Peek(1); len(more) == 0 {
				return nil
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followPoll):
		}
	}
}

// rotated says whether path now names another file than fh.
func rotated(fh *os.File, path string) bool {
	a, err1 := fh.Stat()
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && !os.SameFile(a, b)
}

// Tail writes the last lines complete lines of the container log at path
// (with its rotated files) to w, as containerLogs?tailLines=lines does.
func Tail(ctx context.Context, path string, lines int64, w io.Writer) error {
	return Stream(ctx, path, ReadOptions{TailLines: &lines}, w, func() {}, nil)
}
