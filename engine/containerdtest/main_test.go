// Package containerdtest holds the engine's tests on a real containerd
// (root only: cri/harness starts a private containerd per test; without
// root they skip). They drive the engine through its exported API
// (engine.New, Run, Pods, PodHistory, NodeHistory) and feed the same two
// checks as the engine package's tests, whose union engine/internal/suite
// checks (engine/doc.go, # Tests).
package containerdtest

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/internal/suite"
)

func TestMain(m *testing.M) { suite.Main(m, "engine/containerdtest") }

// formatPods prints what a user reads from GET /pods (phase, conditions
// and per container state, reason, exit code, restarts and readiness), as
// the engine scripts print it; the tests show it when they fail.
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
