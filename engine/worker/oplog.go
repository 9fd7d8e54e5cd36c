package worker

import (
	"context"
	"log/slog"

	"github.com/speclet/speclet/engine/observe"
	"github.com/speclet/speclet/fsm"
)

// This file derives the operator's log lines (info level, -v 0) from the
// machine transitions: one line per lifecycle step a person wants to see,
// from typed observers of the pod and container machines (observe.go). The
// SyncLoop ADD/UPDATE/REMOVE lines come from the engine's sync loop.

// killReasons names, per container event that leads from running to
// stopping, why the container is killed.
var killReasons = map[fsm.ContainerEvent]string{
	fsm.ContainerEventKill:            "pod terminating",
	fsm.ContainerEventLivenessFailed:  "liveness probe failed",
	fsm.ContainerEventSandboxDied:     "sandbox died",
	fsm.ContainerEventUpdate:          "spec changed",
	fsm.ContainerEventPostStartFailed: "postStart hook failed",
}

// lifecycleAttrs are the attributes of a lifecycle line: the machine's pod
// (and container), the pod's UID, then extra.
func lifecycleAttrs(o observe.Owner, w *Worker, extra ...any) []any {
	return append(append(o.LogAttrs(), "uid", w.uid), extra...)
}

// logContainerStep logs the container's lifecycle line of a step, if any:
// its death (with the exit and what the restart policy decided), its start,
// its kill.
func logContainerStep(ctx context.Context, st *ctrStep) {
	c := st.Owner
	log := c.p.h.Log
	if !log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	if st.Event == fsm.ContainerEventExitRecorded {
		// The exit is known once record_exit ran; the step then leaves
		// through the deciding choice to the restart policy's answer.
		var extra []any
		if t := c.Current(); t != nil {
			extra = []any{"exit-code", t.ExitCode, "reason", t.Reason}
			if t.Reason == "StartError" && t.Message != "" {
				// The runtime's word on why the start failed; a
				// program's own termination message stays in /pods.
				extra = append(extra, "message", t.Message)
			}
		}
		log.Info("container died", lifecycleAttrs(c, c.p.w, append(extra, "next", st.To.String())...)...)
		return
	}
	if st.From == st.To {
		return
	}
	switch st.To {
	case fsm.ContainerStateRunning:
		log.Info("container started", lifecycleAttrs(c, c.p.w)...)
	case fsm.ContainerStateStopping:
		reason, ok := killReasons[st.Event]
		if !ok {
			reason = st.Event.String()
		}
		log.Info("killing container", lifecycleAttrs(c, c.p.w, "reason", reason, "event", st.Event.String())...)
	}
}

// logPodStep logs the pod's lifecycle line of a step, if any: its kill,
// its completion, its end.
func logPodStep(ctx context.Context, st *podStep) {
	s := st.Owner
	log := s.h.Log
	if st.From == st.To || !log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	switch st.To {
	case fsm.PodStateTerminating:
		log.Info("killing pod", lifecycleAttrs(s, s.w, "event", st.Event.String())...)
	case fsm.PodStateCompleted:
		log.Info("pod completed: its sandbox is stopped; its containers are kept until the pod is removed", lifecycleAttrs(s, s.w)...)
	case fsm.PodStateFinished:
		log.Info("pod finished: nothing of it is left in the runtime", lifecycleAttrs(s, s.w)...)
	}
}
