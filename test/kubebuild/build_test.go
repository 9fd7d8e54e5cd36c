package kubebuild

import (
	"reflect"
	"testing"
)

// TestStagingModules reads the modules k8s.io/kubernetes takes from its
// staging tree, and its go line, from a go.mod in its style.
func TestStagingModules(t *testing.T) {
	gomod := []byte(`module k8s.io/kubernetes

go 1.24.0

require k8s.io/api v0.0.0

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	github.com/other/mod => github.com/fork/mod v1.0.0
)

replace k8s.io/kubelet => ./staging/src/k8s.io/kubelet
`)
	mods, goLine := StagingModules(gomod)
	if want := []string{"k8s.io/api", "k8s.io/client-go", "k8s.io/kubelet"}; !reflect.DeepEqual(mods, want) {
		t.Errorf("staging modules %v, want %v", mods, want)
	}
	if goLine != "go 1.24.0" {
		t.Errorf("go line %q, want go 1.24.0", goLine)
	}
}
