package engine

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"PORT": "8080", "HOST": "localhost"}
	for _, tc := range []struct{ in, want string }{
		{"serve --port=$(PORT)", "serve --port=8080"},
		{"$(HOST):$(PORT)", "localhost:8080"},
		{"$$(PORT) stays", "$(PORT) stays"},
		{"$(MISSING) stays", "$(MISSING) stays"},
		{"price: 5$", "price: 5$"},
		{"$(UNCLOSED", "$(UNCLOSED"},
		{"plain", "plain"},
	} {
		if got := expand(tc.in, vars); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestContainerConfig: what the runtime is asked to create for a container
// of a hostNetwork pod: speclet's labels and annotations, the log path under
// the pod's log directory, expanded args, the node's network namespace.
func TestContainerConfig(t *testing.T) {
	pod := benchPod(7)
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "GREETING", Value: "hello"}, {Name: "MSG", Value: "$(GREETING) world"}}
	c.Args = []string{"echo", "$(MSG)"}
	cfg, err := containerConfig("/root", pod, c, 3, "sha256:abc", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Args[1]; got != "hello world" {
		t.Errorf("args[1] = %q, want %q", got, "hello world")
	}
	if cfg.LogPath != "app/3.log" {
		t.Errorf("log path = %q, want app/3.log", cfg.LogPath)
	}
	if cfg.Labels[LabelPodUID] != string(pod.UID) || cfg.Labels[LabelContainerName] != "app" || cfg.Labels[LabelPodName] != pod.Name {
		t.Errorf("labels = %v, want pod uid, name and container name", cfg.Labels)
	}
	if cfg.Annotations[AnnotationRestartCount] != "3" || cfg.Annotations[AnnotationContainerHash] != containerHash(c) {
		t.Errorf("annotations = %v, want restart count 3 and the spec hash", cfg.Annotations)
	}
	if cfg.Metadata.Attempt != 3 || cfg.Image.Image != "sha256:abc" {
		t.Errorf("attempt %d image %q, want attempt 3 and the pulled image reference", cfg.Metadata.Attempt, cfg.Image.Image)
	}
	if ns := cfg.Linux.SecurityContext.NamespaceOptions.Network.String(); ns != "NODE" {
		t.Errorf("network namespace = %s, want NODE for a hostNetwork pod", ns)
	}
	sb := sandboxConfig("/root", pod, 0)
	if sb.LogDirectory != "/root/logs/default_"+pod.Name+"_"+string(pod.UID) {
		t.Errorf("sandbox log directory = %q", sb.LogDirectory)
	}
	if sb.Hostname != "" {
		t.Errorf("hostNetwork sandbox hostname = %q, want none (the node's)", sb.Hostname)
	}
}

func TestPullPolicy(t *testing.T) {
	for _, tc := range []struct {
		image, policy string
		want          v1.PullPolicy
	}{
		{"busybox", "", v1.PullAlways},
		{"busybox:latest", "", v1.PullAlways},
		{"127.0.0.1:5000/busybox", "", v1.PullAlways},
		{"127.0.0.1:5000/busybox:1.36", "", v1.PullIfNotPresent},
		{"busybox@sha256:0123", "", v1.PullIfNotPresent},
		{"busybox:latest", "Never", v1.PullNever},
	} {
		c := &v1.Container{Image: tc.image, ImagePullPolicy: v1.PullPolicy(tc.policy)}
		if got := pullPolicy(c); got != tc.want {
			t.Errorf("pullPolicy(%q, %q) = %s, want %s", tc.image, tc.policy, got, tc.want)
		}
	}
}
