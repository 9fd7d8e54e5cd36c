package podspec

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
		if got := Expand(tc.in, vars); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
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
		if got := PullPolicy(c); got != tc.want {
			t.Errorf("pullPolicy(%q, %q) = %s, want %s", tc.image, tc.policy, got, tc.want)
		}
	}
}
