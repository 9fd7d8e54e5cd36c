package worker

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/fsm"
	"github.com/speclet/speclet/spec"
	"github.com/speclet/speclet/verify"
)

// tieWorld is the engine's view of one valuation the model reaches: a pod
// with one container per instance (init, sidecar or regular, in order), its
// machines in the valuation's states. The test sets the pod's restart
// policy, its admission, each container's image and pull policy, and
// records the exit of one container at a time (exit_failed).
type tieWorld struct {
	pod  *podState
	ctrs []*ctrState
}

func newTieWorld(t *testing.T, v verify.Valuation) *tieWorld {
	t.Helper()
	pod := &v1.Pod{}
	always := v1.ContainerRestartPolicyAlways
	for i, role := range v.Roles {
		c := v1.Container{Name: fmt.Sprintf("c%d", i)}
		switch role {
		case "sidecar":
			c.RestartPolicy = &always
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		case "init":
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
		default:
			pod.Spec.Containers = append(pod.Spec.Containers, c)
		}
	}
	ps := &podState{w: &Worker{}, pod: pod}
	ps.Bind(ps)
	podSt, ok := fsm.ParsePodState(v.Single[fsm.PodMachineName])
	if !ok {
		t.Fatalf("pod state %q", v.Single[fsm.PodMachineName])
	}
	ps.machine = fsm.NewPodMachineAt(podSt, ps)
	sbSt, ok := fsm.ParseSandboxState(v.Single[fsm.SandboxMachineName])
	if !ok {
		t.Fatalf("sandbox state %q", v.Single[fsm.SandboxMachineName])
	}
	ps.sandbox = &sandboxState{p: ps}
	ps.sandbox.Bind(ps.sandbox)
	ps.sandbox.machine = fsm.NewSandboxMachineAt(sbSt, ps.sandbox)
	probeSt, ok := fsm.ParseProbeState(v.Single[fsm.ProbeMachineName])
	if !ok {
		t.Fatalf("probe state %q", v.Single[fsm.ProbeMachineName])
	}
	w := &tieWorld{pod: ps}
	specs := append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for i, role := range v.Roles {
		st, ok := fsm.ParseContainerState(v.Instances[i])
		if !ok {
			t.Fatalf("container state %q", v.Instances[i])
		}
		c := &ctrState{p: ps, name: specs[i].Name, init: role != "regular", sidecar: role == "sidecar"}
		c.bind()
		c.setSpec(&specs[i])
		c.machine = fsm.NewContainerMachineAt(st, c)
		// The model has one probe machine per pod: each container's
		// probe machine is in its state.
		c.probe = &probeState{c: c}
		c.probe.Bind(c.probe)
		c.probe.machine = fsm.NewProbeMachineAt(probeSt, c.probe)
		if c.init {
			ps.inits = append(ps.inits, c)
		} else {
			ps.containers = append(ps.containers, c)
		}
		w.ctrs = append(w.ctrs, c)
	}
	return w
}

// engineGuards are the engine's functions for the guards the spec ties, by
// machine and guard name; inst is the container instance (container
// machine only).
var engineGuards = map[string]map[string]func(w *tieWorld, inst int) bool{
	fsm.ContainerMachineName: {
		"first_probe_kill": func(w *tieWorld, i int) bool { return w.ctrs[i].FirstProbeKill() },
		"image_invalid":    func(w *tieWorld, i int) bool { return w.ctrs[i].ImageInvalid() },
		"pod_terminating":  func(w *tieWorld, i int) bool { return w.ctrs[i].PodTerminating() },
		"pull_always":      func(w *tieWorld, i int) bool { return w.ctrs[i].PullAlways() },
		"pull_never":       func(w *tieWorld, i int) bool { return w.ctrs[i].PullNever() },
		"restart_allowed":  func(w *tieWorld, i int) bool { return w.ctrs[i].RestartAllowed() },
		"start_blocked":    func(w *tieWorld, i int) bool { return w.ctrs[i].StartBlocked() },
	},
	fsm.SandboxMachineName: {
		"recreate_forbidden": func(w *tieWorld, _ int) bool { return w.pod.sandbox.RecreateForbidden() },
	},
	fsm.PodMachineName: {
		"admission_refused":      func(w *tieWorld, _ int) bool { return w.pod.AdmissionRefused() },
		"all_containers_stopped": func(w *tieWorld, _ int) bool { return w.pod.AllContainersStopped() },
		"pod_done":               func(w *tieWorld, _ int) bool { return w.pod.PodDone() },
	},
}

// tieSetting is one value of each parameter of spec/system.hcl, as the
// model names it and as the engine's pod and containers hold it.
type tieSetting struct {
	restart   string // restart_policy
	policy    v1.RestartPolicy
	pull      string // pull_policy
	admission string // admission
	image     string // image_reference
	// container sets a container's image and imagePullPolicy so that the
	// engine reads pull and image from it.
	container func(c *v1.Container)
}

// tieSettings give every parameter each of its values at least once. Each
// guard's ties read one parameter at most, so a guard meets every value of
// it without the product of all parameters.
var tieSettings = []tieSetting{
	{restart: "always", policy: v1.RestartPolicyAlways, pull: "always", admission: "admitted", image: "valid",
		// untagged: Always by default (podspec.PullPolicy)
		container: func(c *v1.Container) { c.Image, c.ImagePullPolicy = "busybox", "" }},
	{restart: "on_failure", policy: v1.RestartPolicyOnFailure, pull: "if_not_present", admission: "refused", image: "invalid",
		// tagged: IfNotPresent by default; upper case does not parse
		container: func(c *v1.Container) { c.Image, c.ImagePullPolicy = "BusyBox:1.37", "" }},
	{restart: "never", policy: v1.RestartPolicyNever, pull: "never", admission: "admitted", image: "valid",
		container: func(c *v1.Container) { c.Image, c.ImagePullPolicy = "busybox:1.37", v1.PullNever }},
}

// TestGuardsMatchTies: on every valuation `speclet spec verify` reaches
// (1 to 3 containers of every role order), under every value of every
// parameter (restart policy, admission, pull policy, image reference) and
// with the exit of the guard's container a failure or not, each engine
// guard the spec ties gives what its ties say: true where they say true,
// false where they say false (free leaves it open). A tie that lies about
// the engine makes the model prove things of another program.
func TestGuardsMatchTies(t *testing.T) {
	s, diags := spec.Parse(spec.Embedded())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	ties, err := verify.NewTies(s)
	if err != nil {
		t.Fatal(err)
	}
	checked, decided := map[string]int{}, map[string]int{}
	for machine, guards := range engineGuards {
		for _, g := range ties.Guards(machine) {
			if guards[g] == nil {
				t.Errorf("spec ties guard %s.%s, which this test does not run: add the engine's function to engineGuards", machine, g)
			}
		}
	}
	mismatches := 0
	// Two containers: every role order the model explores with two (52k
	// valuations); three take 750k valuations and 30 s of exploration
	// alone.
	for k := 1; k <= 2; k++ {
		ties.Reachable(k, func(v verify.Valuation) {
			// The guards are pure and read the pod's restart policy,
			// admission and container specs when asked: one world
			// serves every setting (building it was most of the
			// test's time).
			w := newTieWorld(t, v)
			for _, set := range tieSettings {
				w.pod.pod.Spec.RestartPolicy = set.policy
				w.pod.w.refusal = nil
				if set.admission == "refused" {
					w.pod.w.refusal = &Refusal{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu"}
				}
				for _, c := range w.ctrs {
					set.container(c.spec)
				}
				params := map[string]string{"restart_policy": set.restart, "pull_policy": set.pull, "admission": set.admission, "image_reference": set.image}
				for inst := range v.Instances {
					for _, failed := range []bool{false, true} {
						w.ctrs[inst].SetExit(&termination{ExitCode: map[bool]int32{false: 0, true: 1}[failed]})
						for machine, guards := range engineGuards {
							if machine != fsm.ContainerMachineName && inst > 0 {
								continue // a once-per-pod guard does not depend on inst
							}
							for g, eval := range guards {
								want, err := ties.Guard(machine, g, v, inst, params, map[string]bool{"exit_failed": failed})
								if err != nil {
									t.Fatal(err)
								}
								checked[machine+"."+g]++
								if want == verify.AnswerFree {
									continue
								}
								decided[machine+"."+g]++
								if got := eval(w, inst); got != (want == verify.AnswerTrue) {
									mismatches++
									if mismatches <= 20 {
										t.Errorf("%s.%s of container %d in %s, %v exit_failed=%v: engine %v, ties %v",
											machine, g, inst, v, params, failed, got, want)
									}
								}
							}
						}
						w.ctrs[inst].SetExit(nil)
					}
				}
			}
		})
	}
	if mismatches > 20 {
		t.Errorf("... %d mismatches in all", mismatches)
	}
	for machine, guards := range engineGuards {
		for g := range guards {
			if checked[machine+"."+g] == 0 {
				t.Errorf("%s.%s was never checked", machine, g)
			} else if decided[machine+"."+g] == 0 {
				t.Errorf("%s.%s: its ties left it free on every valuation, so the engine's guard was never compared", machine, g)
			}
		}
	}
	t.Logf("checked: %v", checked)
}
