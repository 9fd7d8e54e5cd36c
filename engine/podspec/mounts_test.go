package podspec

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
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
		rro   bool // the runtime handler supports recursive read-only mounts
		rec   bool // the mount is recursive read-only
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
		{name: "recursiveReadOnly IfPossible", mount: roMount(v1.RecursiveReadOnlyIfPossible), host: ".", ro: true},
		{name: "recursiveReadOnly IfPossible, supported", mount: roMount(v1.RecursiveReadOnlyIfPossible), host: ".", ro: true, rro: true, rec: true},
		{name: "recursiveReadOnly Enabled, supported", mount: roMount(v1.RecursiveReadOnlyEnabled), host: ".", ro: true, rro: true, rec: true},
		{name: "recursiveReadOnly Disabled, supported", mount: roMount(v1.RecursiveReadOnlyDisabled), host: ".", ro: true, rro: true},
		{name: "recursiveReadOnly Enabled, not supported", mount: roMount(v1.RecursiveReadOnlyEnabled),
			err: `failed to resolve recursive read-only mode: volume "scratch" requested recursive read-only mode, but it is not supported by the runtime`},
		{name: "recursiveReadOnly on a writable mount", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s", RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)}, rro: true,
			err: `failed to resolve recursive read-only mode: volume "scratch" requested recursive read-only mode, but it is not read-only`},
		{name: "recursiveReadOnly with propagation", mount: v1.VolumeMount{Name: "scratch", MountPath: "/s", ReadOnly: true,
			RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyEnabled), MountPropagation: ptr.To(v1.MountPropagationHostToContainer)}, rro: true,
			err: `failed to resolve recursive read-only mode: volume "scratch" requested recursive read-only mode, but it is not compatible with propagation "HostToContainer"`},
		{name: "recursiveReadOnly unknown", mount: roMount("Sometimes"), rro: true,
			err: `failed to resolve recursive read-only mode: unknown recursive read-only mode "Sometimes"`},
		{name: "no such volume", mount: v1.VolumeMount{Name: "gone", MountPath: "/g"}, err: `volumeMounts "gone": no such volume`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{tc.mount}}
			ms, err := containerMounts(root, pod, c, vars, tc.rro)
			if erred(t, err, tc.err) {
				return
			}
			m := ms[0]
			if m.ContainerPath != tc.mount.MountPath || m.Readonly != tc.ro || m.Propagation != tc.prop || m.RecursiveReadOnly != tc.rec {
				t.Errorf("mount %+v, want path %s readonly %v propagation %s recursive %v", m, tc.mount.MountPath, tc.ro, tc.prop, tc.rec)
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

// roMount is a read-only mount of the scratch volume with recursiveReadOnly
// mode.
func roMount(mode v1.RecursiveReadOnlyMode) v1.VolumeMount {
	return v1.VolumeMount{Name: "scratch", MountPath: "/s", ReadOnly: true, RecursiveReadOnly: &mode}
}

// TestRecursiveReadOnlyConfigError: a recursiveReadOnly the runtime cannot
// honour is kubelet's CreateContainerConfigError message, without
// speclet's prefix.
func TestRecursiveReadOnlyConfigError(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}}}
	_, err := containerMounts(t.TempDir(), pod, &v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{roMount(v1.RecursiveReadOnlyEnabled)}}, nil, false)
	var cerr *ConfigError
	if !errors.As(err, &cerr) {
		t.Fatalf("error %v (%T), want a *ConfigError", err, err)
	}
	const want = `failed to resolve recursive read-only mode: volume "scratch" requested recursive read-only mode, but it is not supported by the runtime`
	if cerr.Message() != want {
		t.Errorf("message %q, want %q", cerr.Message(), want)
	}
}

// TestVolumeMountStatuses is kubelet's status.volumeMounts: recursiveReadOnly
// only on read-only mounts, resolved against the runtime handler.
func TestVolumeMountStatuses(t *testing.T) {
	c := &v1.Container{VolumeMounts: []v1.VolumeMount{
		{Name: "rw", MountPath: "/rw"},
		{Name: "ro", MountPath: "/ro", ReadOnly: true},
		roMount(v1.RecursiveReadOnlyIfPossible),
		{Name: "en", MountPath: "/en", ReadOnly: true, RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyEnabled)},
	}}
	dis, en := ptr.To(v1.RecursiveReadOnlyDisabled), ptr.To(v1.RecursiveReadOnlyEnabled)
	for rro, want := range map[bool][]v1.VolumeMountStatus{
		true: {{Name: "rw", MountPath: "/rw"}, {Name: "ro", MountPath: "/ro", ReadOnly: true, RecursiveReadOnly: dis},
			{Name: "scratch", MountPath: "/s", ReadOnly: true, RecursiveReadOnly: en}, {Name: "en", MountPath: "/en", ReadOnly: true, RecursiveReadOnly: en}},
		false: {{Name: "rw", MountPath: "/rw"}, {Name: "ro", MountPath: "/ro", ReadOnly: true, RecursiveReadOnly: dis},
			{Name: "scratch", MountPath: "/s", ReadOnly: true, RecursiveReadOnly: dis}, {Name: "en", MountPath: "/en", ReadOnly: true, RecursiveReadOnly: dis}},
	} {
		if got := VolumeMountStatuses(c, rro); !reflect.DeepEqual(got, want) {
			t.Errorf("rro %v:\n got %+v\nwant %+v", rro, got, want)
		}
	}
	if got := VolumeMountStatuses(&v1.Container{}, true); got != nil {
		t.Errorf("no mounts: %+v", got)
	}
}
