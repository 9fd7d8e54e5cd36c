package podstatus

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPhaseNeverGoesBackwards: once Succeeded or Failed, a pod keeps its
// phase whatever its containers look like later.
func TestPhaseNeverGoesBackwards(t *testing.T) {
	pod := onePod()
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	now := time.Now()
	done := &View{Pod: pod, Containers: []Container{{Name: "app", Phase: Terminated, Current: &Termination{ExitCode: 1}}}}
	st := Compute(nil, done, now)
	if st.Phase != v1.PodFailed {
		t.Fatalf("phase = %s, want Failed for exit code 1 under Never", st.Phase)
	}
	for _, later := range []*View{
		{Pod: pod, Containers: []Container{{Name: "app", Phase: Running}}},
		{Pod: pod, Containers: []Container{{Name: "app", Phase: Terminated, Current: &Termination{ExitCode: 0}}}},
		{Pod: pod, Containers: []Container{{Name: "app", Phase: Waiting}}},
	} {
		if got := Compute(&st, later, now).Phase; got != v1.PodFailed {
			t.Errorf("phase after Failed = %s, want Failed", got)
		}
	}
}

func TestQOSClass(t *testing.T) {
	q := resource.MustParse
	for _, tc := range []struct {
		name string
		res  v1.ResourceRequirements
		want v1.PodQOSClass
	}{
		{"nothing set", v1.ResourceRequirements{}, v1.PodQOSBestEffort},
		{"limits equal requests", v1.ResourceRequirements{
			Limits:   v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("64Mi")},
			Requests: v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("64Mi")}}, v1.PodQOSGuaranteed},
		{"limits only", v1.ResourceRequirements{
			Limits: v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("64Mi")}}, v1.PodQOSGuaranteed},
		{"a request below its limit", v1.ResourceRequirements{
			Limits:   v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("64Mi")},
			Requests: v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("64Mi")}}, v1.PodQOSBurstable},
		{"memory request only", v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: q("64Mi")}}, v1.PodQOSBurstable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := onePod()
			pod.Spec.Containers[0].Resources = tc.res
			if got := qosClass(pod); got != tc.want {
				t.Errorf("qosClass = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestReadinessGates: with every container ready, the pod is Ready only
// when each readiness gate's condition (set by others in the API) is True;
// otherwise Ready is False with kubelet's reason and messages, while
// ContainersReady stays True.
func TestReadinessGates(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name       string
		conditions []v1.PodCondition
		ready      v1.ConditionStatus
		msg        string
	}{
		{"gate missing", nil, v1.ConditionFalse, `corresponding condition of pod readiness gate "example.com/lb" does not exist., corresponding condition of pod readiness gate "example.com/dns" does not exist.`},
		{"one gate false", []v1.PodCondition{{Type: "example.com/lb", Status: v1.ConditionTrue}, {Type: "example.com/dns", Status: v1.ConditionFalse}},
			v1.ConditionFalse, `the status of pod readiness gate "example.com/dns" is not "True", but False`},
		{"both true", []v1.PodCondition{{Type: "example.com/lb", Status: v1.ConditionTrue}, {Type: "example.com/dns", Status: v1.ConditionTrue}}, v1.ConditionTrue, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := onePod()
			pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: "example.com/dns"}}
			pod.Status.Conditions = tc.conditions
			v := &View{Pod: pod, SandboxReady: true, Containers: []Container{{Name: "app", Phase: Running, Ready: true, Started: true}}}
			st := Compute(nil, v, now)
			var ready, containers *v1.PodCondition
			for i := range st.Conditions {
				switch st.Conditions[i].Type {
				case v1.PodReady:
					ready = &st.Conditions[i]
				case v1.ContainersReady:
					containers = &st.Conditions[i]
				}
			}
			if ready == nil || ready.Status != tc.ready || ready.Message != tc.msg {
				t.Errorf("Ready = %+v\nwant %s %q", ready, tc.ready, tc.msg)
			}
			if tc.ready == v1.ConditionFalse && ready.Reason != "ReadinessGatesNotReady" {
				t.Errorf("Ready reason %q, want ReadinessGatesNotReady", ready.Reason)
			}
			if containers == nil || containers.Status != v1.ConditionTrue {
				t.Errorf("ContainersReady = %+v, want True", containers)
			}
		})
	}
}

// TestConditionMessagesInSpecOrder: the containers a condition's message
// names come in spec order, sidecars first, as kubelet lists them (not
// sorted by name).
func TestConditionMessagesInSpecOrder(t *testing.T) {
	pod := onePod()
	v := &View{Pod: pod, SandboxReady: true,
		Inits:      []Container{{Name: "zinit"}, {Name: "side", Init: true, Sidecar: true}, {Name: "ainit"}},
		Containers: []Container{{Name: "web"}, {Name: "app"}}}
	st := Compute(nil, v, time.Now())
	want := map[v1.PodConditionType]string{
		v1.PodInitialized:  "containers with incomplete status: [zinit side ainit]",
		v1.PodReady:        "containers with unready status: [side web app]",
		v1.ContainersReady: "containers with unready status: [side web app]",
	}
	for _, c := range st.Conditions {
		if w, ok := want[c.Type]; ok && (c.Status != v1.ConditionFalse || c.Message != w) {
			t.Errorf("%s = %s %q, want False %q", c.Type, c.Status, c.Message, w)
		}
	}
}

// onePod is a pod of one container, restartPolicy Always.
func onePod() *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "app", Image: "busybox:latest"}}}}
}

// TestTerminatedPod: kubelet's TerminatePod. A pod whose containers all
// stopped for good (deleted while its only container waited for its image)
// ends Failed, its container terminated with ContainerStatusUnknown and 137;
// a static pod keeps its phase; a container that showed its exit keeps it.
func TestTerminatedPod(t *testing.T) {
	now := time.Now()
	pod := onePod()
	pending := &View{Pod: pod, Terminating: true, Terminated: true, Containers: []Container{{Name: "app", Phase: Waiting, WaitingReason: "ErrImagePull"}}}
	st := Compute(nil, pending, now)
	if st.Phase != v1.PodFailed {
		t.Errorf("deleted while pending: phase %s, want Failed", st.Phase)
	}
	if n := len(st.ContainerStatuses); n != 1 {
		t.Fatalf("%d container statuses, want 1", n)
	}
	if term := st.ContainerStatuses[0].State.Terminated; term == nil || term.Reason != ReasonContainerStatusUnknown || term.ExitCode != 137 || term.Message != MessageContainerNotLocated {
		t.Errorf("deleted while pending: container state %+v, want terminated %s 137", st.ContainerStatuses[0].State, ReasonContainerStatusUnknown)
	}
	if st := Compute(nil, &View{Pod: pod, Terminating: true, Containers: pending.Containers}, now); st.Phase != v1.PodPending || st.ContainerStatuses[0].State.Waiting == nil {
		t.Errorf("still terminating: phase %s, state %+v, want Pending and waiting", st.Phase, st.ContainerStatuses[0].State)
	}
	static := &View{Pod: pod, Static: true, Terminating: true, Terminated: true, Containers: pending.Containers}
	if st := Compute(nil, static, now); st.Phase != v1.PodPending {
		t.Errorf("static pod: phase %s, want Pending (kubelet leaves a static pod's phase)", st.Phase)
	}
	killed := &View{Pod: pod, Terminating: true, Terminated: true, Containers: []Container{{Name: "app", Phase: Terminated, Current: &Termination{ExitCode: 137, Reason: "Error"}}}}
	st = Compute(nil, killed, now)
	if term := st.ContainerStatuses[0].State.Terminated; st.Phase != v1.PodFailed || term == nil || term.Reason != "Error" {
		t.Errorf("killed: phase %s, state %+v, want Failed and its own exit", st.Phase, st.ContainerStatuses[0].State)
	}

	// With init containers: not initialized (the init container never ran)
	// the regular container stays waiting and the first init container ends.
	withInit := onePod()
	withInit.Spec.InitContainers = []v1.Container{{Name: "init"}}
	v := &View{Pod: withInit, Terminating: true, Terminated: true,
		Inits:      []Container{{Name: "init", Init: true, Phase: Waiting}},
		Containers: []Container{{Name: "app", Phase: Waiting}}}
	st = Compute(nil, v, now)
	if st.Phase != v1.PodFailed || st.ContainerStatuses[0].State.Waiting == nil || st.InitContainerStatuses[0].State.Terminated == nil {
		t.Errorf("not initialized: phase %s, init %+v, app %+v; want Failed, init terminated, app waiting", st.Phase, st.InitContainerStatuses[0].State, st.ContainerStatuses[0].State)
	}
}
