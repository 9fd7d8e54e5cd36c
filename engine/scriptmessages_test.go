package engine

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// formatMessages prints the waiting reason and message of every container
// that shows one, as `pod/container: REASON: message` (init containers as
// `pod/init:name`); the test's directory (runtime errors name its socket)
// is shown as $DIR.
func formatMessages(ps []*v1.Pod, dir string) string {
	var lines []string
	add := func(p *v1.Pod, prefix string, css []v1.ContainerStatus) {
		for _, cs := range css {
			if w := cs.State.Waiting; w != nil && w.Message != "" {
				lines = append(lines, p.Name+"/"+prefix+cs.Name+": "+w.Reason+": "+strings.ReplaceAll(w.Message, dir, "$DIR"))
			}
		}
	}
	for _, p := range ps {
		add(p, "init:", p.Status.InitContainerStatuses)
		add(p, "", p.Status.ContainerStatuses)
	}
	if len(lines) == 0 {
		return "none"
	}
	return strings.Join(lines, "\n")
}
