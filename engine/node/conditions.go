// The node's conditions (Ready and the pressures) and the events of their
// transitions.

package node

import (
	"os"
	"strconv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/speclet/speclet/engine/cgroups"
)

func (n *Node) health() error {
	if n.cfg.Health == nil {
		return nil
	}
	return n.cfg.Health()
}

// pressure is what the machine says of memory, disk and PIDs.
type pressure struct {
	memAvail, diskAvail, diskTotal, pidsUsed, pidMax uint64
}

func (n *Node) pressure() pressure {
	var p pressure
	if m, err := cgroups.Meminfo(""); err == nil {
		p.memAvail = m["MemAvailable"]
	}
	p.diskTotal, p.diskAvail, _ = diskSpace(n.cfg.RootDir)
	p.pidMax, _ = strconv.ParseUint(readTrim("/proc/sys/kernel/pid_max"), 10, 64)
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				p.pidsUsed++
			}
		}
	}
	return p
}

// conditions is the node's four conditions now: pressure from
// Config.Pressure when set, else measured.
func (n *Node) conditions(prev []v1.NodeCondition, now metav1.Time) []v1.NodeCondition {
	if n.cfg.Pressure == nil {
		return conditions(prev, now, n.health(), n.pressure())
	}
	c := n.cfg.Pressure()
	return conditionsOf(prev, now, n.health(), c[v1.NodeMemoryPressure], c[v1.NodeDiskPressure], c[v1.NodePIDPressure])
}

// conditions builds the four node conditions from the machine compared
// with kubelet's default hard eviction thresholds.
func conditions(prev []v1.NodeCondition, now metav1.Time, health error, p pressure) []v1.NodeCondition {
	memLow := p.memAvail > 0 && p.memAvail < 100<<20
	diskLow := p.diskTotal > 0 && p.diskAvail*10 < p.diskTotal
	pidLow := p.pidMax > 0 && (p.pidMax-min(p.pidsUsed, p.pidMax))*10 < p.pidMax
	return conditionsOf(prev, now, health, memLow, diskLow, pidLow)
}

// conditionsOf builds the four node conditions with kubelet's reasons and
// messages; a condition's lastTransitionTime moves only when its status
// changes.
func conditionsOf(prev []v1.NodeCondition, now metav1.Time, health error, memLow, diskLow, pidLow bool) []v1.NodeCondition {
	old := map[v1.NodeConditionType]v1.NodeCondition{}
	for _, c := range prev {
		old[c.Type] = c
	}
	mk := func(t v1.NodeConditionType, bad bool, badReason, okReason, badMsg, okMsg string) v1.NodeCondition {
		c := v1.NodeCondition{Type: t, Status: v1.ConditionFalse, Reason: okReason, Message: okMsg, LastHeartbeatTime: now, LastTransitionTime: now}
		if bad {
			c.Status, c.Reason, c.Message = v1.ConditionTrue, badReason, badMsg
		}
		if t == v1.NodeReady { // Ready is True when all is well
			c.Status = map[bool]v1.ConditionStatus{true: v1.ConditionFalse, false: v1.ConditionTrue}[bad]
		}
		if o, ok := old[t]; ok && o.Status == c.Status {
			c.LastTransitionTime = o.LastTransitionTime
		}
		return c
	}
	readyMsg := "speclet is posting ready status"
	notReady := ""
	if health != nil {
		notReady = health.Error()
	}
	return []v1.NodeCondition{
		mk(v1.NodeMemoryPressure, memLow, "KubeletHasInsufficientMemory", "KubeletHasSufficientMemory",
			"kubelet has insufficient memory available", "kubelet has sufficient memory available"),
		mk(v1.NodeDiskPressure, diskLow, "KubeletHasDiskPressure", "KubeletHasNoDiskPressure",
			"kubelet has disk pressure", "kubelet has no disk pressure"),
		mk(v1.NodePIDPressure, pidLow, "KubeletHasInsufficientPID", "KubeletHasSufficientPID",
			"kubelet has insufficient PID available", "kubelet has sufficient PID available"),
		mk(v1.NodeReady, health != nil, "KubeletNotReady", "KubeletReady", notReady, readyMsg),
	}
}

// transitionEvents is the reasons of kubelet's node status events for the
// conditions going from prev to next (its nodestatus setters).
func transitionEvents(prev, next []v1.NodeCondition) []string {
	old := map[v1.NodeConditionType]v1.ConditionStatus{}
	for _, c := range prev {
		old[c.Type] = c.Status
	}
	var out []string
	for _, c := range next {
		o, had := old[c.Type]
		if o == c.Status {
			continue
		}
		bad := c.Status == v1.ConditionTrue
		switch c.Type {
		case v1.NodeMemoryPressure:
			out = append(out, map[bool]string{true: "NodeHasInsufficientMemory", false: "NodeHasSufficientMemory"}[bad])
		case v1.NodeDiskPressure:
			out = append(out, map[bool]string{true: "NodeHasDiskPressure", false: "NodeHasNoDiskPressure"}[bad])
		case v1.NodePIDPressure:
			out = append(out, map[bool]string{true: "NodeHasInsufficientPID", false: "NodeHasSufficientPID"}[bad])
		case v1.NodeReady:
			if had { // kubelet records Ready only when an existing condition changes
				out = append(out, map[bool]string{true: "NodeReady", false: "NodeNotReady"}[bad])
			}
		}
	}
	return out
}
