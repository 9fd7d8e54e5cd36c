package podspec

import (
	"strings"
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

func TestImageNameError(t *testing.T) {
	for _, tc := range []struct {
		image, want string
	}{
		{image: "busybox"},
		{image: "busybox:1.37.0-1"},
		{image: "registry.k8s.io/e2e-test-images/agnhost:2.56"},
		{image: "127.0.0.1:5000/private/busybox:1.0"},
		{image: "busybox@sha256:" + strings.Repeat("a", 64)},
		{image: "busybox:@@bad", want: `Failed to apply default image tag "busybox:@@bad": couldn't parse image name "busybox:@@bad": invalid reference format`},
		{image: "Busybox", want: `Failed to apply default image tag "Busybox": couldn't parse image name "Busybox": invalid reference format: repository name (library/Busybox) must be lowercase`},
		{image: "busybox@sha256:abc", want: `Failed to apply default image tag "busybox@sha256:abc": couldn't parse image name "busybox@sha256:abc": invalid reference format`},
	} {
		err := ImageNameError(tc.image)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("ImageNameError(%q) = %q, want %q", tc.image, got, tc.want)
		}
	}
}

// erred checks err against want, the error a test case expects (its text
// contains want; "": no error), failing t when they disagree, and reports
// whether an error was expected (the case has nothing more to check).
func erred(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want %q", err, want)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
