package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/internal/suite"
)

// formatImages lists the images present, by first reference, sorted.
func (h *scriptHarness) formatImages() string {
	imgs, err := h.rt.ListImages(context.Background(), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	var lines []string
	for _, img := range imgs {
		lines = append(lines, fmt.Sprintf("%s %s", img.RepoTags[0], resource.NewQuantity(int64(img.Size), resource.BinarySI)))
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		return "none"
	}
	return strings.Join(lines, "\n")
}

// formatNodeHistory prints the node machine's transitions since the last
// call, each with its time since the harness's start and its actions.
func (h *scriptHarness) formatNodeHistory(from int) (string, int) {
	all := h.eng.NodeHistory()
	var b strings.Builder
	for _, t := range all[min(from, len(all)):] {
		fmt.Fprintf(&b, "+%s %s -%s-> %s", t.Time.Sub(h.t0), t.From, t.Event, t.To)
		writeActions(&b, t.Actions, func(err string) string {
			// The socket path and container IDs change from run to run.
			return "error: " + quotedContainerID.ReplaceAllString(criEndpoint.ReplaceAllString(err, "cri: "), `"<container-id>"`)
		})
		b.WriteString("\n")
	}
	if b.Len() == 0 {
		return "none", len(all)
	}
	return strings.TrimSuffix(b.String(), "\n"), len(all)
}

// formatCallLog prints the recorded StartContainer, ExecSync and
// StopContainer calls in order, with their timeouts; sorted by line when
// sorted is set.
func (h *scriptHarness) formatCallLog(sorted bool) string {
	var out []string
	for _, c := range h.srv.Runtime.CallLog() {
		line := c.Method + " " + c.Pod + "/" + c.Container
		switch c.Method {
		case "ExecSync":
			line += fmt.Sprintf(" %v timeout=%d", c.Cmd, c.Timeout)
		case "StopContainer":
			line += fmt.Sprintf(" timeout=%d", c.Timeout)
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return "none"
	}
	if sorted {
		sort.Strings(out)
	}
	return strings.Join(out, "\n")
}

// formatPods, formatContainer: pods and containers as the scripts print
// them (suite.FormatPods).
var (
	formatPods      = suite.FormatPods
	formatContainer = suite.FormatContainer
)

// formatRuntime prints the simulated runtime's sandboxes and containers.
func (h *scriptHarness) formatRuntime() string {
	ctx := context.Background()
	sbs, err := h.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	cs, err := h.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		h.t.Fatal(err)
	}
	names := map[string]string{}
	var lines []string
	for _, s := range sbs {
		names[s.Id] = s.Metadata.Name
		line := fmt.Sprintf("sandbox %s attempt=%d %s", s.Metadata.Name, s.Metadata.Attempt,
			strings.TrimPrefix(s.State.String(), "SANDBOX_"))
		if s.RuntimeHandler != "" {
			line += " handler=" + s.RuntimeHandler
		}
		lines = append(lines, line)
	}
	for _, c := range cs {
		lines = append(lines, fmt.Sprintf("container %s/%s attempt=%d %s", names[c.PodSandboxId], c.Metadata.Name,
			c.Metadata.Attempt, strings.TrimPrefix(c.State.String(), "CONTAINER_")))
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		return "empty"
	}
	return strings.Join(lines, "\n")
}

// formatTransitions prints the transitions machines of kind machine took
// (speclet_transitions_total): "from -event-> to: N", sorted.
func (h *scriptHarness) formatTransitions(machine string) string {
	return h.formatCounters("speclet_transitions_total", machine, func(l map[string]string, n float64) string {
		return fmt.Sprintf("%s -%s-> %s: %v", l["from"], l["event"], l["to"], n)
	})
}

// formatRejected prints the events the machines of kind machine refused
// (speclet_rejected_events_total): "state -event-> rejected: N", sorted.
func (h *scriptHarness) formatRejected(machine string) string {
	return h.formatCounters("speclet_rejected_events_total", machine, func(l map[string]string, n float64) string {
		return fmt.Sprintf("%s -%s-> rejected: %v", l["state"], l["event"], n)
	})
}

// formatCounters prints a line for each counter of metric whose machine
// label is machine and whose value is not 0, sorted.
func (h *scriptHarness) formatCounters(metric, machine string, line func(labels map[string]string, n float64) string) string {
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["machine"] != machine || m.GetCounter().GetValue() == 0 {
				continue
			}
			lines = append(lines, line(l, m.GetCounter().GetValue()))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// formatHistory prints a pod's debug view: machine states, then the
// transitions of machine ("" for all), each with its time since the
// harness's start, guard, choices and actions (errors included).
func (h *scriptHarness) formatHistory(uid, machine string) string {
	p, ok := h.eng.PodHistory(uid)
	if !ok {
		return "no pod " + uid
	}
	var b strings.Builder
	gone := ""
	if p.Gone {
		gone = " (gone)"
	}
	fmt.Fprintf(&b, "%s phase=%s%s\n", p.Name, p.Phase, gone)
	for _, m := range p.Machines {
		fmt.Fprintf(&b, "  %s%s: %s since +%s\n", m.Machine, instance(m.Instance), m.State, m.Since.Sub(h.t0))
	}
	for _, t := range p.History {
		if machine != "" && t.Machine != machine {
			continue
		}
		guard := ""
		if t.Guard != "" {
			guard = " [" + t.Guard + "]"
		}
		fmt.Fprintf(&b, "+%s %s%s: %s -%s%s-> %s", t.Time.Sub(h.t0), t.Machine, instance(t.Instance), t.From, t.Event, guard, t.To)
		if len(t.Choices) > 0 {
			fmt.Fprintf(&b, " via %s", strings.Join(t.Choices, ", "))
		}
		writeActions(&b, t.Actions, func(string) string { return "error" })
		b.WriteString("\n")
	}
	return b.String()
}

func instance(name string) string {
	if name == "" {
		return ""
	}
	return "/" + name
}

// writeActions appends the actions of a transition to b as " / a, b", an
// action that failed followed by what note says of its error in brackets.
func writeActions(b *strings.Builder, actions []ActionResult, note func(err string) string) {
	for i, a := range actions {
		sep := ", "
		if i == 0 {
			sep = " / "
		}
		b.WriteString(sep + a.Action)
		if a.Error != "" {
			b.WriteString(" (" + note(a.Error) + ")")
		}
	}
}
