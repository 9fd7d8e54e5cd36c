// Package oomwatch reads the kernel's OOM kills from /dev/kmsg, as
// kubelet's OOM watcher does through cadvisor's oomparser, and says which of
// them kubelet reports on the node as a SystemOOM event.
//
// Contracts:
//   - ParseRecord reads one /dev/kmsg record ("PRIO,SEQ,USEC,FLAGS;text",
//     continuation lines " KEY=value" dropped).
//   - Parser turns the kernel's OOM report into one Kill: a report starts
//     with "<comm> invoked oom-killer:" and ends with the summary line
//     "oom-kill:constraint=...,oom_memcg=<cgroup>,task_memcg=<cgroup>,
//     task=<comm>,pid=<pid>,uid=<uid>" (kernels 5.0 and later) or, before
//     it, "Killed process <pid> (<comm>)"; the legacy "Task in <cgroup>
//     killed as a result of limit of <cgroup>" names the cgroups on older
//     kernels. Lines between the start and the end are otherwise ignored,
//     as cadvisor does.
//   - Kill.Cgroup is the memory cgroup whose limit was enforced (the
//     kernel's oom_memcg), "/" when the whole machine ran out of memory
//     (the summary says global_oom, or names no cgroup).
//   - SystemOOM is kubelet's rule (pkg/kubelet/oom/oom_watcher_linux.go):
//     only a kill whose cgroup is "/" is a system OOM, recorded as a
//     Warning "SystemOOM" with "System OOM encountered, victim process:
//     <comm>, pid: <pid>". A kill enforcing a container's or any other
//     cgroup's limit is not (a container's shows as OOMKilled on it).
//   - Watch feeds a Source's records through a Parser until the Source
//     ends; OpenKmsg is the real Source, positioned at the end of the ring
//     buffer (kills after the start only).
package oomwatch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Record is one kernel log record.
type Record struct {
	Priority int // facility<<3 | level
	Seq      uint64
	// Time is the record's timestamp, since boot.
	Time    time.Duration
	Message string
}

// ParseRecord parses a /dev/kmsg record.
func ParseRecord(s string) (Record, error) {
	head, msg, ok := strings.Cut(s, ";")
	if !ok {
		return Record{}, fmt.Errorf("kmsg record %q: no ';' after the prefix", trim(s))
	}
	f := strings.Split(head, ",")
	if len(f) < 3 {
		return Record{}, fmt.Errorf("kmsg record %q: want PRIORITY,SEQUENCE,TIMESTAMP before ';'", trim(s))
	}
	prio, err1 := strconv.Atoi(f[0])
	seq, err2 := strconv.ParseUint(f[1], 10, 64)
	usec, err3 := strconv.ParseInt(f[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Record{}, fmt.Errorf("kmsg record %q: %w", trim(s), err)
	}
	msg, _, _ = strings.Cut(msg, "\n") // continuation lines (" KEY=value") follow
	return Record{Priority: prio, Seq: seq, Time: time.Duration(usec) * time.Microsecond, Message: msg}, nil
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// Kill is one OOM kill the kernel reported.
type Kill struct {
	Pid     int
	Process string // the victim's comm
	// Cgroup is the memory cgroup whose limit the kill enforced, "/" for
	// a system-wide OOM.
	Cgroup string
	// TaskCgroup is the victim's memory cgroup ("" when not reported).
	TaskCgroup string
	// Constraint is the kernel's CONSTRAINT_NONE, CONSTRAINT_MEMCG, ...
	// ("" when not reported).
	Constraint string
	// Time is when the report ended, since boot.
	Time time.Duration
}

// System says whether kubelet reports the kill as a system OOM.
func (k Kill) System() bool { return k.Cgroup == "/" }

// SystemOOM is kubelet's event for a kill: ok only for a system OOM.
func SystemOOM(k Kill) (reason, message string, ok bool) {
	if !k.System() {
		return "", "", false
	}
	message = "System OOM encountered"
	if k.Process != "" && k.Pid != 0 {
		message = fmt.Sprintf("%s, victim process: %s, pid: %d", message, k.Process, k.Pid)
	}
	return "SystemOOM", message, true
}

var (
	startRe   = regexp.MustCompile(`invoked oom-killer:`)
	summaryRe = regexp.MustCompile(`oom-kill:constraint=([^,]*),nodemask=(.*),cpuset=(.*),mems_allowed=(.*),(?:oom_memcg=(.*)|global_oom),task_memcg=(.*),task=(.*),pid=([0-9]+),uid=([0-9]+)`)
	legacyRe  = regexp.MustCompile(`Task in (.*) killed as a result of limit of (.*)`)
	killedRe  = regexp.MustCompile(`Killed process ([0-9]+) \((.+)\)`)
)

// Parser assembles Kills from records; the zero value is ready.
type Parser struct {
	cur *Kill
}

// Feed takes the next record and returns a Kill when it ended one.
func (p *Parser) Feed(r Record) (Kill, bool) {
	if p.cur == nil {
		if startRe.MatchString(r.Message) {
			p.cur = &Kill{Cgroup: "/", Time: r.Time}
		}
		return Kill{}, false
	}
	k := p.cur
	if m := summaryRe.FindStringSubmatch(r.Message); m != nil {
		pid, err := strconv.Atoi(m[8])
		if err != nil {
			return Kill{}, false
		}
		k.Constraint, k.TaskCgroup, k.Process, k.Pid = m[1], m[6], m[7], pid
		if m[5] != "" {
			k.Cgroup = m[5]
		}
		return p.finish(r)
	}
	if m := legacyRe.FindStringSubmatch(r.Message); m != nil {
		k.TaskCgroup, k.Cgroup = clean(m[1]), clean(m[2])
		return Kill{}, false
	}
	if m := killedRe.FindStringSubmatch(r.Message); m != nil {
		pid, err := strconv.Atoi(m[1])
		if err != nil {
			return Kill{}, false
		}
		k.Pid, k.Process = pid, m[2]
		return p.finish(r)
	}
	return Kill{}, false
}

func (p *Parser) finish(r Record) (Kill, bool) {
	k := *p.cur
	k.Time = r.Time
	p.cur = nil
	return k, true
}

// clean makes a legacy cgroup name absolute, as cadvisor's path.Join("/", x).
func clean(s string) string {
	if !strings.HasPrefix(s, "/") {
		s = "/" + s
	}
	return s
}

// Source yields kernel log records, one per call; io.EOF ends it.
type Source interface {
	Next() (string, error)
}

// Watch feeds src's records through a Parser and calls kill for each kill,
// until src ends (nil at io.EOF). A record that does not parse is skipped.
func Watch(src Source, kill func(Kill)) error {
	var p Parser
	for {
		s, err := src.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		r, err := ParseRecord(s)
		if err != nil {
			continue
		}
		if k, ok := p.Feed(r); ok {
			kill(k)
		}
	}
}

// Kmsg is /dev/kmsg as a Source.
type Kmsg struct {
	f   *os.File
	buf []byte
}

// OpenKmsg opens path (/dev/kmsg) at the end of the ring buffer: only
// records written from now on are read.
func OpenKmsg(path string) (*Kmsg, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, fmt.Errorf("seek to the end of %s: %w", path, err)
	}
	return &Kmsg{f: f, buf: make([]byte, 8192)}, nil
}

// Next returns the next record; each read of /dev/kmsg is one record. When
// the kernel overwrote records not yet read (EPIPE), reading goes on with
// the oldest one left. Close ends a blocked Next with io.EOF.
func (k *Kmsg) Next() (string, error) {
	for {
		n, err := k.f.Read(k.buf)
		if errors.Is(err, syscall.EPIPE) {
			continue
		}
		if errors.Is(err, os.ErrClosed) {
			return "", io.EOF
		}
		if err != nil {
			return "", err
		}
		return string(k.buf[:n]), nil
	}
}

// Close closes the device.
func (k *Kmsg) Close() error { return k.f.Close() }

// Lines is a Source of one record per line (a saved kmsg dump).
func Lines(r io.Reader) Source { return &lines{r: r} }

type lines struct {
	r    io.Reader
	rest []string
	done bool
}

func (l *lines) Next() (string, error) {
	if l.rest == nil && !l.done {
		b, err := io.ReadAll(l.r)
		if err != nil {
			return "", err
		}
		l.rest, l.done = strings.Split(strings.TrimRight(string(b), "\n"), "\n"), true
	}
	if len(l.rest) == 0 {
		return "", io.EOF
	}
	s := l.rest[0]
	l.rest = l.rest[1:]
	return s, nil
}
