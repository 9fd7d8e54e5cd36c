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
