package containerdtest

import (
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
)

// podEvents records pod events by namespace/name.
type podEvents struct {
	mu  sync.Mutex
	got map[string][]string // "Reason: message"
}

func (r *podEvents) Event(pod *v1.Pod, _, _, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[string][]string{}
	}
	k := pod.Namespace + "/" + pod.Name
	r.got[k] = append(r.got[k], reason+": "+message)
}

func (r *podEvents) has(pod, event string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.got[pod], event)
}

// TestContainerdImagePullSecrets pulls from a registry that wants basic
// authentication: a pod whose imagePullSecrets hold the registry's
// credentials runs; a pod without them, and a pod whose secret does not
// exist, wait in ErrImagePull/ImagePullBackOff, with the missing secret
// named in a FailedToRetrieveImagePullSecret event. (Before pull secrets
// were read, all three waited.)
func TestContainerdImagePullSecrets(t *testing.T) {
	c, ctx := containerdFor(t, 3*time.Minute)
	c.Registry.RequireAuth("private/", "alice", "s3cret")
	bb, err := harness.BusyboxImage()
	if err != nil {
		t.Fatal(err)
	}
	image, err := c.Registry.Push(ctx, "private/busybox:1.0", bb)
	if err != nil {
		t.Fatal(err)
	}
	cred := &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{
		v1.DockerConfigJsonKey: []byte(`{"auths":{"` + c.Registry.Addr + `":{"username":"alice","password":"s3cret"}}}`)}}
	cred.Name, cred.Namespace = "regcred", "team"
	// The pods without working credentials pull Always: once the pod with
	// them has pulled the image, IfNotPresent would run them from the
	// node's copy, and whether they were seen waiting first was a race.
	pod := func(name string, secrets ...string) *v1.Pod {
		policy := v1.PullAlways
		if slices.Contains(secrets, "regcred") {
			policy = v1.PullIfNotPresent
		}
		p := shPod(c, name, v1.RestartPolicyNever, 1, "sleep 3600")
		p.Namespace = "team"
		p.Spec.Containers[0].Image, p.Spec.Containers[0].ImagePullPolicy = image, policy
		for _, s := range secrets {
			p.Spec.ImagePullSecrets = append(p.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s})
		}
		return p
	}
	pods := []*v1.Pod{pod("without"), pod("missing", "nope"), pod("with", "nope", "regcred")}
	events := &podEvents{}
	_, e, updates := startPods(ctx, t, c, engine.Config{VolumeAPI: objectAPI{secrets: map[string]*v1.Secret{"team/regcred": cred}}, Events: events}, pods...)
	waitPhase(t, ctx, e, "with", v1.PodRunning)
	for _, name := range []string{"without", "missing"} {
		waitFor(t, ctx, name+" waiting on its pull", func() bool {
			w := mainStatus(e, name).State.Waiting
			return w != nil && (w.Reason == engine.ReasonErrImagePull || w.Reason == "ImagePullBackOff")
		}, e)
		if st := podNamed(e, name).Status; st.Phase != v1.PodPending {
			t.Errorf("%s: phase %s, want Pending", name, st.Phase)
		}
	}
	waitFor(t, ctx, "FailedToRetrieveImagePullSecret event naming the secret", func() bool {
		return events.has("team/missing", "FailedToRetrieveImagePullSecret: Unable to retrieve some image pull secrets (nope); attempting to pull the image may not succeed.")
	}, e)
	removePods(updates, pods...)
	waitFor(t, ctx, "pods removed", func() bool { return len(e.Pods()) == 0 }, e)
}
