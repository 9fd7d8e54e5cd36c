package harness

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// LeftBehind lists what is left of the directories dirs: the processes that
// name one of them on their command line and their descendants (Leftovers:
// speclet, etcd and the API server, containerd, shims, the pods'
// processes), the mount points under them (Mounts), and the directories
// themselves, one line each ("process PID: CMDLINE", "mount PATH",
// "directory PATH"). It is empty once everything started under dirs is
// gone.
func LeftBehind(dirs ...string) []string {
	var out []string
	for _, d := range dirs {
		out = append(out, leftUnder(d)...)
		if _, err := os.Lstat(d); err == nil {
			out = append(out, "directory "+d)
		}
	}
	return out
}

// leftUnder is LeftBehind of dir less the directory itself.
func leftUnder(dir string) []string {
	var out []string
	for _, p := range Leftovers(dir) {
		out = append(out, fmt.Sprintf("process %d: %s", p.PID, p.Cmdline))
	}
	for _, m := range Mounts(dir) {
		out = append(out, "mount "+m)
	}
	return out
}

// Leaks is a check that a test leaves nothing on the machine (CheckLeaks).
type Leaks struct {
	t      testing.TB
	before map[int]bool // the test process's descendants when the check began; nil: not checked

	mu    sync.Mutex
	gone  []string // must not exist at the end, nor anything of them
	clean []string // may exist at the end, but with nothing mounted or running
}

// outer is set while a check that looks at the test process's descendants
// runs (the outermost CheckLeaks of a test).
var outer struct {
	sync.Mutex
	active bool
}

// CheckLeaks fails t at its end, listing each thing left, when something
// is left of a directory given to Gone or Clean, or, for the outermost
// check (none other was active when it began), when a process the test
// process started since the call (a descendant that was not running then)
// is still running: a check nested in another one (a node's, within its
// cluster's) may see processes the test still needs, which the outer one
// sees stopped. It runs in t.Cleanup, registered by this call: after every
// cleanup registered later, so call it before starting what it checks.
// What it finds it then kills and unmounts, so that the next test starts
// on a clean machine. It assumes no test runs in parallel with t.
func CheckLeaks(t testing.TB) *Leaks {
	t.Helper()
	l := &Leaks{t: t}
	outer.Lock()
	if !outer.active {
		outer.active = true
		l.before = map[int]bool{}
		for _, p := range descendants(os.Getpid()) {
			l.before[p.PID] = true
		}
	}
	outer.Unlock()
	t.Cleanup(l.check)
	return l
}

// Gone adds dir to the check: at the end no process names it, nothing is
// mounted at or under it, and it does not exist.
func (l *Leaks) Gone(dir string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gone = append(l.gone, dir)
}

// Clean adds dir to the check: at the end no process names it and nothing
// is mounted at or under it; it may still exist (a t.TempDir, which the
// test framework removes).
func (l *Leaks) Clean(dir string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clean = append(l.clean, dir)
}

func (l *Leaks) check() {
	if l.before != nil {
		defer func() {
			outer.Lock()
			outer.active = false
			outer.Unlock()
		}()
	}
	l.mu.Lock()
	dirs := append(append([]string(nil), l.gone...), l.clean...)
	gone := l.gone
	l.mu.Unlock()
	left := LeftBehind(gone...)
	for _, d := range l.clean {
		left = append(left, leftUnder(d)...)
	}
	listed := map[int]bool{}
	for _, d := range dirs {
		for _, p := range Leftovers(d) {
			listed[p.PID] = true
		}
	}
	var started []Process
	for _, p := range descendants(os.Getpid()) {
		if l.before == nil {
			break
		}
		if l.before[p.PID] {
			continue
		}
		started = append(started, p)
		if !listed[p.PID] {
			left = append(left, fmt.Sprintf("process %d: %s", p.PID, p.Cmdline))
		}
	}
	if len(left) == 0 {
		return
	}
	l.t.Errorf("left behind at the end of the test (now killed and unmounted):\n  %s", strings.Join(left, "\n  "))
	for _, d := range dirs {
		for _, p := range Leftovers(d) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
	for _, p := range started {
		_ = syscall.Kill(p.PID, syscall.SIGKILL)
	}
	for _, d := range dirs {
		if err := Unmount(d); err != nil {
			l.t.Errorf("harness: %v", err)
		}
	}
}

// descendants lists the live processes below pid (children, theirs, ...).
func descendants(pid int) []Process {
	children := map[int][]Process{}
	for _, p := range processes() {
		children[p.PPID] = append(children[p.PPID], p)
	}
	var out []Process
	var walk func(int)
	walk = func(pid int) {
		for _, c := range children[pid] {
			out = append(out, c)
			walk(c.PID)
		}
	}
	walk(pid)
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}
