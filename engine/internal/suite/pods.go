package suite

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/config"
)

// FormatPods prints what a user reads from GET /pods: phase, conditions and
// per container state, reason, exit code, restarts and readiness. The engine
// scripts print pods so, and the tests on a real containerd show them so
// when they fail.
func FormatPods(ps []*v1.Pod) string {
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
			fmt.Fprintf(&b, "  init %s\n", FormatContainer(cs))
		}
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, "  %s\n", FormatContainer(cs))
		}
		for _, cs := range p.Status.EphemeralContainerStatuses {
			fmt.Fprintf(&b, "  ephemeral %s\n", FormatContainer(cs))
		}
	}
	if b.Len() == 0 {
		return "no pods"
	}
	return strings.TrimRight(b.String(), "\n")
}

// FormatContainer prints one container status as FormatPods does.
func FormatContainer(cs v1.ContainerStatus) string {
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

// Pod is pod i of the engine's benchmarks and unit tests ("p%05d", UID
// "uid-p%05d"): a static pod from a file on the host's network, one
// busybox container, a grace period of 1 s.
func Pod(i int) *v1.Pod {
	g := int64(1)
	name := fmt.Sprintf("p%05d", i)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
		Spec: v1.PodSpec{HostNetwork: true, TerminationGracePeriodSeconds: &g, RestartPolicy: v1.RestartPolicyAlways,
			Containers: []v1.Container{{Name: "app", Image: "busybox:latest", ImagePullPolicy: v1.PullIfNotPresent}}},
	}
}
