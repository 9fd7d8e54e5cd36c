package podphase

import "testing"

func TestOf(t *testing.T) {
	var (
		notStarted = func(k Kind) Container { return Container{Kind: k} }
		runs       = func(k Kind) Container { return Container{Kind: k, State: Runs} }
		exitedOK   = func(k Kind) Container { return Container{Kind: k, State: Exited} }
		exitedFail = func(k Kind) Container { return Container{Kind: k, State: Exited, Failed: true} }
	)
	cs := func(c ...Container) []Container { return c }
	for _, tc := range []struct {
		name string
		pod  Pod
		want Phase
	}{
		{"no container", Pod{}, Pending},
		{"a container not started yet", Pod{Containers: cs(notStarted(Regular))}, Pending},
		{"one runs, one not started yet", Pod{Containers: cs(runs(Regular), notStarted(Regular))}, Pending},
		{"every container runs", Pod{Containers: cs(runs(Regular), runs(Regular))}, Running},
		{"one runs, one exited", Pod{Policy: Never, Containers: cs(runs(Regular), exitedFail(Regular))}, Running},

		{"Always: all exited, restarting", Pod{Policy: Always, Containers: cs(exitedOK(Regular))}, Running},
		{"Always: all exited, pod terminated", Pod{Policy: Always, Terminating: true, Terminated: true, Containers: cs(exitedOK(Regular))}, Succeeded},
		{"Always: all exited while terminating", Pod{Policy: Always, Terminating: true, Containers: cs(exitedFail(Regular))}, Failed},
		{"OnFailure: all exited 0", Pod{Policy: OnFailure, Containers: cs(exitedOK(Regular), exitedOK(Regular))}, Succeeded},
		{"OnFailure: one failed, restarting", Pod{Policy: OnFailure, Containers: cs(exitedOK(Regular), exitedFail(Regular))}, Running},
		{"OnFailure: one failed, pod terminated", Pod{Policy: OnFailure, Terminating: true, Terminated: true, Containers: cs(exitedFail(Regular))}, Failed},
		{"Never: all exited 0", Pod{Policy: Never, Containers: cs(exitedOK(Regular))}, Succeeded},
		{"Never: one failed", Pod{Policy: Never, Containers: cs(exitedOK(Regular), exitedFail(Regular))}, Failed},

		{"init container runs", Pod{Containers: cs(runs(Init), notStarted(Regular))}, Pending},
		{"init container failed, restarting (OnFailure)", Pod{Policy: OnFailure, Containers: cs(exitedFail(Init), notStarted(Regular))}, Pending},
		{"init container failed under Never", Pod{Policy: Never, Containers: cs(exitedFail(Init), notStarted(Regular))}, Failed},
		{"init container failed under Never, after the regular ones ran", Pod{Policy: Never, Containers: cs(exitedFail(Init), runs(Regular))}, Failed},
		{"init containers done, regular not started", Pod{Containers: cs(exitedOK(Init), exitedOK(Init), notStarted(Regular))}, Pending},
		{"init containers done, regular runs", Pod{Containers: cs(exitedOK(Init), runs(Regular))}, Running},
		{"init container re-running after the regular ones ran", Pod{Containers: cs(runs(Init), runs(Regular))}, Running},

		{"sidecar not started yet", Pod{Containers: cs(notStarted(Sidecar), notStarted(Regular))}, Pending},
		{"sidecar runs, regular not started", Pod{Containers: cs(runs(Sidecar), notStarted(Regular))}, Pending},
		{"sidecar and regular run", Pod{Containers: cs(runs(Sidecar), runs(Regular))}, Running},
		{"regular completed, sidecar still runs", Pod{Policy: Never, Containers: cs(runs(Sidecar), exitedOK(Regular))}, Running},
		{"regular completed, sidecar exited", Pod{Policy: Never, Containers: cs(exitedFail(Sidecar), exitedOK(Regular))}, Succeeded},
		{"sidecar restarting while the regular runs", Pod{Containers: cs(exitedFail(Sidecar), runs(Regular))}, Running},
		{"sidecar stopped before it ran, regular completed", Pod{Policy: Never, Terminating: true, Containers: cs(notStarted(Sidecar), exitedOK(Regular))}, Pending},
		{"a failed sidecar does not fail the pod under Never", Pod{Policy: Never, Containers: cs(exitedFail(Sidecar), runs(Regular))}, Running},
	} {
		if got := Of(tc.pod); got != tc.want {
			t.Errorf("%s: Of(%+v) = %s, want %s", tc.name, tc.pod, got, tc.want)
		}
	}
}

// TestConditionsOf: kubelet's rules for the conditions, with their reasons
// and messages.
func TestConditionsOf(t *testing.T) {
	c := func(name string, k Kind, s State, failed, ready bool) Container {
		return Container{Name: name, Kind: k, State: s, Failed: failed, Ready: ready, Ran: s != NotStarted, Shown: s != NotStarted}
	}
	type want struct {
		init, ready, containers Condition
	}
	for _, tc := range []struct {
		name  string
		pod   Pod
		phase Phase
		want  want
	}{
		{"init containers pending", Pod{Containers: []Container{c("b", Init, Exited, true, false), c("a", Init, NotStarted, false, false), c("app", Regular, NotStarted, false, false)}}, Pending,
			want{Condition{Reason: ReasonContainersNotInitialized, Message: "containers with incomplete status: [b a]"},
				Condition{Reason: ReasonContainersNotReady, Message: "containers with unready status: [app]"},
				Condition{Reason: ReasonContainersNotReady, Message: "containers with unready status: [app]"}}},
		{"a sidecar that ran counts as initialized; unready sidecars count", Pod{Containers: []Container{{Name: "side", Kind: Sidecar, Ran: true}, c("web", Regular, Runs, false, true), c("app", Regular, Runs, false, false)}}, Running,
			want{Condition{True: true},
				Condition{Reason: ReasonContainersNotReady, Message: "containers with unready status: [side app]"},
				Condition{Reason: ReasonContainersNotReady, Message: "containers with unready status: [side app]"}}},
		{"a regular container started: initialized whatever the init containers", Pod{Containers: []Container{c("i", Init, Exited, true, false), c("app", Regular, Runs, false, true)}}, Running,
			want{Condition{True: true}, Condition{True: true}, Condition{True: true}}},
		{"a regular container waiting after an exit is not shown started", Pod{Containers: []Container{c("i", Init, Exited, true, false), {Name: "app", Kind: Regular, State: Exited}}}, Running,
			want{Condition{Reason: ReasonContainersNotInitialized, Message: "containers with incomplete status: [i]"},
				Condition{Reason: ReasonContainersNotReady, Message: "containers with unready status: [app]"},
				Condition{Reason: ReasonContainersNotReady, Message: "containers with unready status: [app]"}}},
		{"an init container waiting to run again after an exit 0 is incomplete", Pod{Containers: []Container{{Name: "i", Kind: Init, State: Exited}, c("app", Regular, NotStarted, false, false)}}, Pending,
			want{Condition{Reason: ReasonContainersNotInitialized, Message: "containers with incomplete status: [i]"},
				Condition{Reason: ReasonContainersNotReady, Message: "containers with unready status: [app]"},
				Condition{Reason: ReasonContainersNotReady, Message: "containers with unready status: [app]"}}},
		{"an init container terminated with 0 is complete", Pod{Containers: []Container{c("i", Init, Exited, false, true), c("app", Regular, NotStarted, false, false)}}, Pending,
			want{Condition{True: true},
				Condition{Reason: ReasonContainersNotReady, Message: "containers with unready status: [app]"},
				Condition{Reason: ReasonContainersNotReady, Message: "containers with unready status: [app]"}}},
		{"readiness gates", Pod{Gates: []string{"g1", "g2"}, Containers: []Container{c("app", Regular, Runs, false, true)}}, Running,
			want{Condition{True: true}, Condition{Reason: ReasonReadinessGatesNotReady, Message: "g1, g2"}, Condition{True: true}}},
		{"Succeeded", Pod{Containers: []Container{c("i", Init, NotStarted, false, false), c("app", Regular, Exited, false, false)}}, Succeeded,
			want{Condition{True: true, Reason: ReasonPodCompleted}, Condition{Reason: ReasonPodCompleted}, Condition{Reason: ReasonPodCompleted}}},
		{"Failed while a container is ready", Pod{Gates: []string{"g"}, Containers: []Container{c("app", Regular, Runs, false, true)}}, Failed,
			want{Condition{True: true}, Condition{Reason: ReasonPodFailed}, Condition{Reason: ReasonPodFailed}}},
	} {
		got := ConditionsOf(tc.pod, tc.phase)
		if got.Initialized != tc.want.init || got.Ready != tc.want.ready || got.ContainersReady != tc.want.containers {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
	for _, sandbox := range []bool{false, true} {
		if got := ConditionsOf(Pod{SandboxReady: sandbox}, Pending).ReadyToStartContainers; got.True != sandbox {
			t.Errorf("sandbox ready %v: ReadyToStartContainers %+v", sandbox, got)
		}
	}
	for _, tc := range []struct {
		k                    Kind
		serving, terminating bool
		want                 bool
	}{
		{Regular, true, false, true}, {Regular, true, true, false}, {Regular, false, false, false},
		{Sidecar, true, true, true}, {Sidecar, false, false, false}, {Init, true, false, false},
	} {
		if got := ContainerReady(tc.k, tc.serving, tc.terminating); got != tc.want {
			t.Errorf("ContainerReady(%d, serving %v, terminating %v) = %v", tc.k, tc.serving, tc.terminating, got)
		}
	}
}
