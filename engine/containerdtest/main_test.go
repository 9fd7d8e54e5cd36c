// Package containerdtest holds the engine's tests on a real containerd
// (root only: cri/harness starts a private containerd per test; without
// root they skip). They drive the engine through its exported API
// (engine.New, Run, Pods, PodHistory, NodeHistory) and feed the same two
// checks as the engine package's tests, whose union engine/internal/suite
// checks (engine/doc.go, # Tests).
package containerdtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/internal/suite"
)

func TestMain(m *testing.M) { suite.Main(m, "engine/containerdtest") }

// formatPods, formatContainer: pods and containers as the engine scripts
// print them; the tests show them when they fail.
var (
	formatPods      = suite.FormatPods
	formatContainer = suite.FormatContainer
)

// containerdFor returns t's private containerd (harness.ForTest) and a
// context that ends after d, or when t ends.
func containerdFor(t *testing.T, d time.Duration) (*harness.Containerd, context.Context) {
	c := harness.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c, ctx
}

// shPod is a static pod (file source) name in namespace default, with UID
// name-uid, on the host network, with restart policy and grace seconds of
// grace period, whose one container main runs script with /bin/sh in c's
// busybox image (pulled if not present). Tests set what else they need.
func shPod(c *harness.Containerd, name string, policy v1.RestartPolicy, grace int64, script string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"),
			Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
		Spec: v1.PodSpec{HostNetwork: true, RestartPolicy: policy, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "main", Image: c.ImageRef("busybox:latest"),
				ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"/bin/sh", "-c", script}}}},
	}
}

// writesTo gives p's container main the host directory dir (of hostPath
// type typ, nil: unchecked) at /out, and returns p.
func writesTo(p *v1.Pod, dir string, typ *v1.HostPathType) *v1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "out", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir, Type: typ}}})
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: "out", MountPath: "/out"})
	return p
}

// written is what a container wrote to file name of the host directory
// dir (writesTo's); "" and an error of t if it wrote none.
func written(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Errorf("container wrote no %s: %v", name, err)
	}
	return string(b)
}

// objectAPI serves configMaps and secrets from maps by namespace/name (the
// API server's role, engine.Config.VolumeAPI); it issues no tokens.
type objectAPI struct {
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

func (a objectAPI) GetConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	if cm := a.configMaps[ns+"/"+name]; cm != nil {
		return cm.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (a objectAPI) GetSecret(_ context.Context, ns, name string) (*v1.Secret, error) {
	if s := a.secrets[ns+"/"+name]; s != nil {
		return s.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (a objectAPI) CreateToken(context.Context, string, string, *authv1.TokenRequest) (*authv1.TokenRequest, error) {
	return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "", nil)
}
