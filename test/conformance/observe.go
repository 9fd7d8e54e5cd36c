package conformance

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Absent is the normalized state of a pod missing from GET /pods.
const Absent = "absent"

// Normalize renders what a user sees of a pod's status, minus what differs
// between runs (times, IDs, addresses, messages), as one line:
//
//	PHASE ip=host|pod|none | COND=STATUS(reason)... | [init:]NAME STATE rN last=... ready started
//
// STATE is waiting(Reason), running, or terminated(Reason,exit);
// restartCount is bucketed (0, 1, 2+: the count after that depends on how
// long the backoff ran, which is timing). nil gives Absent.
func Normalize(p *v1.Pod) string {
	if p == nil {
		return Absent
	}
	var b strings.Builder
	st := &p.Status
	// A hostNetwork pod is "host" whatever its podIP: a standalone kubelet
	// (no API client) never sets one, speclet sets the node's address while
	// the sandbox runs (docs/conformance.md).
	ip := "none"
	switch {
	case p.Spec.HostNetwork:
		ip = "host"
	case st.PodIP != "":
		ip = "pod"
	}
	fmt.Fprintf(&b, "%s ip=%s |", orDash(string(st.Phase)), ip)
	conds := append([]v1.PodCondition(nil), st.Conditions...)
	sort.Slice(conds, func(i, j int) bool { return conds[i].Type < conds[j].Type })
	for _, c := range conds {
		fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
		if c.Reason != "" {
			fmt.Fprintf(&b, "(%s)", c.Reason)
		}
	}
	for _, group := range []struct {
		prefix string
		cs     []v1.ContainerStatus
	}{{"init:", st.InitContainerStatuses}, {"", st.ContainerStatuses}} {
		for _, c := range group.cs {
			fmt.Fprintf(&b, " | %s%s %s r%s", group.prefix, c.Name, stateWord(c.State), bucket(c.RestartCount))
			if t := c.LastTerminationState.Terminated; t != nil {
				fmt.Fprintf(&b, " last=%s/%d", t.Reason, t.ExitCode)
			}
			if c.Ready {
				b.WriteString(" ready")
			}
			if c.Started != nil && *c.Started {
				b.WriteString(" started")
			}
		}
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func stateWord(s v1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated(%s,%d)", s.Terminated.Reason, s.Terminated.ExitCode)
	case s.Waiting != nil:
		return fmt.Sprintf("waiting(%s)", s.Waiting.Reason)
	}
	return "none"
}

func bucket(n int32) string {
	switch {
	case n <= 0:
		return "0"
	case n == 1:
		return "1"
	}
	return "2+"
}

// Seen is one distinct normalized state of a pod, in the order sampled.
type Seen struct {
	State string  `json:"state"`
	At    float64 `json:"at"`    // seconds from the manifest's first write to the first sample showing it
	Count int     `json:"count"` // consecutive samples that showed it
}

// Result is what one agent did with one scenario.
type Result struct {
	Scenario string `json:"scenario"`
	Agent    string `json:"agent"`
	Version  string `json:"version,omitempty"`
	// Anchor is when (seconds from the manifest's write) the scenario's
	// clock started: steps and the duration count from it (see Run).
	Anchor float64 `json:"anchor"`
	// States are the distinct consecutive states sampled every second.
	States []Seen `json:"states"`
	// Final is the last state sampled before the manifest was removed.
	Final string `json:"final"`
	// Runtime is what the runtime held of the pod at the last sample:
	// "containers=N (running=R exited=E) sandboxes=S (ready=Y)".
	Runtime string `json:"runtime"`
	// GoneFromPods and RuntimeEmpty are seconds from the manifest's removal
	// until the pod left GET /pods and the runtime held nothing of it (-1:
	// not within the wait).
	GoneFromPods float64 `json:"goneFromPods"`
	RuntimeEmpty float64 `json:"runtimeEmpty"`
	Error        string  `json:"error,omitempty"`
}

// add records one sample.
func (r *Result) add(state string, at float64) {
	if n := len(r.States); n > 0 && r.States[n-1].State == state {
		r.States[n-1].Count++
		return
	}
	r.States = append(r.States, Seen{State: state, At: at, Count: 1})
}
