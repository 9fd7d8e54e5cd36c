package podspec

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/engine/volume"
)

// TestContainerMounts: each volumeMount field as the runtime receives it.
func TestContainerMounts(t *testing.T) {
	root := t.TempDir()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
		}}}
	scratch := volume.HostPath(root, pod, &pod.Spec.Volumes[0])
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"POD_NAME": "p", "EMPTY": ""}
	for _, tc := range []struct {
		name  string
		mount v1.VolumeMount
		host  string // relative to the scratch volume; "" skips the check
		ro    bool
		prop  runtimeapi.MountPropagation
		err   string
	}{
		{name: "plain", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s"}, host: "."},
		{name: "readOnly", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s", ReadOnly: true}, host: ".", ro: true},
		{name: "configMap is read-only", mount: v1.VolumeMount{Name: "conf", MountPath: "/c"}, ro: true},
		{name: "subPath", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s", SubPath: "a/b"}, host: "a/b"},
		{name: "subPathExpr", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s", SubPathExpr: "logs/$(POD_NAME)"}, host: "logs/p"},
		{name: "subPathExpr missing variable", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s", SubPathExpr: "$(NOPE)/$(EMPTY)"},
			err: `pod ns/p container "c": volumeMounts "scratch": subPathExpr "$(NOPE)/$(EMPTY)": missing value for EMPTY, NOPE`},
		{name: "subPathExpr may not leave", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s", SubPathExpr: "../$(POD_NAME)"},
			err: `subPath "../p" must not contain '..'`},
		{name: "absolute subPath", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s", SubPath: "/etc"}, err: `subPath "/etc" must be a relative path`},
		{name: "propagation None", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s", MountPropagation: ptr.To(v1.MountPropagationNone)}, host: "."},
		{name: "propagation HostToContainer", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s", MountPropagation: ptr.To(v1.MountPropagationHostToContainer)},
			host: ".", prop: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{name: "propagation Bidirectional", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s", MountPropagation: ptr.To(v1.MountPropagationBidirectional)},
			host: ".", prop: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
		{name: "propagation unknown", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s", MountPropagation: ptr.To(v1.MountPropagationMode("Sideways"))},
			err: `mountPropagation: invalid mode "Sideways"`},
		{name: "recursiveReadOnly IfPossible", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s", ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)},
			host: ".", ro: true},
		{name: "no such volume", mount: v1.VolumeMount{Name: "gone", MountPath: "/g"}, err: `volumeMounts "gone": no such volume`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{tc.mount}}
			ms, err := containerMounts(root, pod, c, vars)
			if erred(t, err, tc.err) {
				return
			}
			m := ms[0]
			if m.ContainerPath != tc.mount.MountPath || m.Readonly != tc.ro || m.Propagation != tc.prop {
				t.Errorf("mount %+v, want path %s readonly %v propagation %s", m, tc.mount.MountPath, tc.ro, tc.prop)
			}
			if tc.host != "" {
				want, _ := filepath.EvalSymlinks(filepath.Join(scratch, tc.host))
				if m.HostPath != want {
					t.Errorf("host path %s, want %s", m.HostPath, want)
				}
			}
		})
	}
}
