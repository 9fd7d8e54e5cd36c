package engine

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/config"
)

// A container whose env names a configMap that does not exist waits with
// kubelet's CreateContainerConfigError and message, and keeps that reason
// through its retries (kubelet shows no CrashLoopBackOff for a container
// that never ran); once the configMap appears it runs. The pod's sandbox,
// made without --cluster-dns, records kubelet's MissingClusterDNS warning.
func TestEnvConfigErrorWaitsThenStarts(t *testing.T) {
	synctest.Test(t, testEnvConfigErrorWaitsThenStarts)
}

func testEnvConfigErrorWaitsThenStarts(t *testing.T) {
	h := newHarness(t)
	api := &memAPI{cms: map[string]*v1.ConfigMap{}}
	h.start(Config{VolumeAPI: api})
	pod := volumePod("envcm")
	pod.Spec.HostNetwork = false
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "LEVEL", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Key: "level"}}}}
	h.send(config.PodUpdate{Op: config.OpAdd, Source: config.SourceFile, Pods: []*v1.Pod{pod}})
	h.step(5*time.Second, time.Second)
	st := h.podStatus("envcm")
	if waitingReason(st) != ReasonCreateContainerConfig || st.ContainerStatuses[0].State.Waiting.Message != `configmaps "settings" not found` {
		t.Fatalf("status %+v, want CreateContainerConfigError with kubelet's message", st)
	}
	events := h.recorded.take()
	for _, want := range []string{
		`envcm Warning MissingClusterDNS: pod: "envcm_default(uid-envcm)". kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`,
		`envcm Warning Failed spec.containers{main}: Error: configmaps "settings" not found`,
	} {
		if !strings.Contains(events, want) {
			t.Errorf("events:\n%s\nwant %s", events, want)
		}
	}
	h.step(30*time.Second, time.Second) // retries under the backoff
	if r := waitingReason(h.podStatus("envcm")); r != ReasonCreateContainerConfig {
		t.Fatalf("waiting reason after retries %q, want %s", r, ReasonCreateContainerConfig)
	}
	if events := h.recorded.take(); strings.Contains(events, "BackOff") || !strings.Contains(events, "Failed") {
		t.Errorf("events of the retries:\n%s\nwant Failed again and no BackOff", events)
	}
	api.set("default", "settings", map[string]string{"level": "debug"})
	if !h.waitFor(2*time.Minute, func() bool {
		st := h.podStatus("envcm")
		return st != nil && st.Phase == v1.PodRunning
	}) {
		t.Fatalf("pod not Running once its configMap exists: %+v", h.podStatus("envcm"))
	}
}
