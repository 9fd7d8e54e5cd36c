package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
		for i, a := range t.Actions {
			sep := ", "
			if i == 0 {
				sep = " / "
			}
			b.WriteString(sep + a.Action)
			if a.Error != "" {
				// The socket path and container IDs change from run to run.
				msg := criEndpoint.ReplaceAllString(a.Error, "cri: ")
				b.WriteString(" (error: " + quotedContainerID.ReplaceAllString(msg, `"<container-id>"`) + ")")
			}
		}
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

// formatPods prints what a user reads from GET /pods: phase, conditions and
// per container state, reason, exit code, restarts and readiness.
func formatPods(ps []*v1.Pod) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "%s uid=%s phase=%s", p.Name, p.UID, p.Status.Phase)
		if p.Status.Reason != "" {
			fmt.Fprintf(&b, " reason=%s message=%q", p.Status.Reason, p.Status.Message)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled {
				continue
			}
			fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
		}
		b.WriteString("\n")
		for _, cs := range p.Status.InitContainerStatuses {
			fmt.Fprintf(&b, "  init %s\n", formatContainer(cs))
		}
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "  %s\n", formatContainer(cs))
		}
		for _, cs := range p.Status.EphemeralContainerStatuses {
			fmt.Fprintf(&b, "  ephemeral %s\n", formatContainer(cs))
		}
	}
	if b.Len() == 0 {
		return "no pods"
	}
	return strings.TrimRight(b.String(), "\n")
}

func formatContainer(cs v1.ContainerStatus) string {
	s := cs.Name + ": " + formatState(cs.State)
	s += fmt.Sprintf(" restarts=%d ready=%t", cs.RestartCount, cs.Ready)
	if cs.State.Running != nil && cs.Started != nil && !*cs.Started {
		s += " started=false"
	}
	if cs.LastTerminationState.Terminated != nil {
		s += " last=" + formatState(cs.LastTerminationState)
	}
	return s
}

func formatState(st v1.ContainerState) string {
	switch {
	case st.Running != nil:
		return "running"
	case st.Terminated != nil:
		return fmt.Sprintf("terminated(%s,%d)", st.Terminated.Reason, st.Terminated.ExitCode)
	case st.Waiting != nil:
		return "waiting(" + st.Waiting.Reason + ")"
	}
	return "unknown"
}

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

// formatTransitions prints the non-zero speclet_transitions_total series of
// one machine.
func (h *scriptHarness) formatTransitions(machine string) string {
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		if mf.GetName() != "speclet_transitions_total" {
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
			lines = append(lines, fmt.Sprintf("%s -%s-> %s: %v", l["from"], l["event"], l["to"], m.GetCounter().GetValue()))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// formatRejected prints the events the machines of kind machine refused
// (speclet_rejected_events_total): "state -event-> rejected: N", sorted.
func (h *scriptHarness) formatRejected(machine string) string {
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	var lines []string
	for _, mf := range mfs {
		if mf.GetName() != "speclet_rejected_events_total" {
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
			lines = append(lines, fmt.Sprintf("%s -%s-> rejected: %v", l["state"], l["event"], m.GetCounter().GetValue()))
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
		for i, a := range t.Actions {
			sep := ", "
			if i == 0 {
				sep = " / "
			}
			b.WriteString(sep + a.Action)
			if a.Error != "" {
				b.WriteString(" (error)")
			}
		}
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
