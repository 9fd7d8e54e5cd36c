package engine

import (
	"context"
	"log/slog"

	"github.com/speclet/speclet/fsm"
)

// This file derives the operator's log lines (info level, -v 0) from the
// machine transitions that fire.go logs at debug level: one line per
// lifecycle step a person wants to see. The SyncLoop ADD/UPDATE/REMOVE lines
// come from the sync loop (engine.go).

// killReasons names, per container event that leads from running to
// stopping, why the container is killed.
var killReasons = map[string]string{
	fsm.ContainerEventKill.String():            "pod terminating",
	fsm.ContainerEventLivenessFailed.String():  "liveness probe failed",
	fsm.ContainerEventSandboxDied.String():     "sandbox died",
	fsm.ContainerEventUpdate.String():          "spec changed",
	fsm.ContainerEventPostStartFailed.String(): "postStart hook failed",
}

// logLifecycle is fire.go's hook: after a transition of machine (its who
// attributes identify the pod and container), it logs the lifecycle line
// keyed on (machine, to-state), if any.
func (w *podWorker) logLifecycle(ctx context.Context, machine, from, event, to string, who []any) {
	log := w.e.log
	if !log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := func(extra ...any) []any {
		out := append(append([]any(nil), who...), "uid", w.uid)
		return append(out, extra...)
	}
	if machine == fsm.ContainerMachineName && event == fsm.ContainerEventExitRecorded.String() {
		// The exit is known once record_exit ran; the step then leaves
		// through the deciding choice to the restart policy's answer.
		var extra []any
		if c := w.container(who); c != nil && c.current != nil {
			extra = []any{"exit-code", c.current.ExitCode, "reason", c.current.Reason}
			if c.current.Reason == "StartError" && c.current.Message != "" {
				// The runtime's word on why the start failed; a
				// program's own termination message stays in /pods.
				extra = append(extra, "message", c.current.Message)
			}
		}
		log.Info("container died", attrs(append(extra, "next", to)...)...)
		return
	}
	if from == to {
		return
	}
	switch machine {
	case fsm.ContainerMachineName:
		switch to {
		case fsm.ContainerStateRunning.String():
			log.Info("container started", attrs()...)
		case fsm.ContainerStateStopping.String():
			reason := killReasons[event]
			if reason == "" {
				reason = event
			}
			log.Info("killing container", attrs("reason", reason, "event", event)...)
		}
	case fsm.PodMachineName:
		switch to {
		case fsm.PodStateTerminating.String():
			log.Info("killing pod", attrs("event", event)...)
		case fsm.PodStateCompleted.String():
			log.Info("pod completed: its sandbox is stopped; its containers are kept until the pod is removed", attrs()...)
		case fsm.PodStateFinished.String():
			log.Info("pod finished: nothing of it is left in the runtime", attrs()...)
		}
	}
}

// container finds the container named by the "container" attribute of who.
func (w *podWorker) container(who []any) *ctrState {
	if w.st == nil {
		return nil
	}
	for i := 0; i+1 < len(who); i += 2 {
		if who[i] == "container" {
			name, _ := who[i+1].(string)
			return w.st.byName[name]
		}
	}
	return nil
}
