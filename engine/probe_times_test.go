package engine

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// noteAdded records when the pod named name was first added (probe-times
// counts from it).
func (h *scriptHarness) noteAdded(name string) {
	if h.added == nil {
		h.added = map[string]time.Time{}
	}
	if _, ok := h.added[name]; !ok {
		h.added[name] = h.clk.Now()
	}
}

// formatProbeTimes prints the exec probes (ExecSync calls) the runtime
// received since the last probe-times, in order of time (probes of one
// instant, which run concurrently, sorted by line), each with its time since
// its pod was added and since the latest start of its container, and which
// instance of the container that start made (0 for the first):
//
//	POD/CONTAINER [CMD] add+D start+D instance=N
func (h *scriptHarness) formatProbeTimes() string {
	log := h.srv.Runtime.CallLog()
	type instance struct {
		n  int
		at time.Time
	}
	started := map[string]instance{}
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	for i, c := range log {
		key := c.Pod + "/" + c.Container
		switch c.Method {
		case "StartContainer":
			in, ok := started[key]
			if ok {
				in.n++
			}
			in.at = c.At
			started[key] = in
		case "ExecSync":
			if i < h.probesShown {
				continue
			}
			in := started[key]
			lines = append(lines, line{c.At, fmt.Sprintf("%s %v add+%s start+%s instance=%d", key, c.Cmd, c.At.Sub(h.added[c.Pod]), c.At.Sub(in.at), in.n)})
		}
	}
	h.probesShown = len(log)
	sort.SliceStable(lines, func(i, j int) bool {
		if !lines[i].at.Equal(lines[j].at) {
			return lines[i].at.Before(lines[j].at)
		}
		return lines[i].text < lines[j].text
	})
	var out []string
	for _, l := range lines {
		out = append(out, l.text)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "\n")
}
