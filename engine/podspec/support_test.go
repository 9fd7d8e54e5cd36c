package podspec

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestUnsupported: each field the node cannot honour is named with its
// path; a pod using only supported fields lists nothing.
func TestUnsupported(t *testing.T) {
	ctr := func(mod func(*v1.Container)) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}, {Name: "b"}}}}
		mod(&p.Spec.Containers[1])
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want []string
	}{
		{"plain", &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}, nil},
		{"supported volumes", &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}},
		}}}, nil},
		{"persistent volume claim", &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
		}}}, []string{`spec.volumes[1]: volume "data": volume type persistentVolumeClaim is not supported`}},
		{"ephemeral containers", &v1.Pod{Spec: v1.PodSpec{EphemeralContainers: []v1.EphemeralContainer{{}}}}, nil},
		{"ephemeral container with a stop signal", &v1.Pod{Spec: v1.PodSpec{EphemeralContainers: []v1.EphemeralContainer{{}, {
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Lifecycle: &v1.Lifecycle{StopSignal: ptr.To(v1.SIGUSR1)}}}}}},
			[]string{"spec.ephemeralContainers[1].lifecycle.stopSignal: container stop signals are not supported"}},
		{"user namespace", &v1.Pod{Spec: v1.PodSpec{HostUsers: ptr.To(false)}}, nil},
		{"host users true", &v1.Pod{Spec: v1.PodSpec{HostUsers: ptr.To(true)}}, nil},
		{"resource claims", &v1.Pod{Spec: v1.PodSpec{ResourceClaims: []v1.PodResourceClaim{{Name: "gpu"}}}},
			[]string{"spec.resourceClaims: dynamic resource allocation is not supported"}},
		{"block volume", ctr(func(c *v1.Container) { c.VolumeDevices = []v1.VolumeDevice{{Name: "b"}} }),
			[]string{"spec.containers[1].volumeDevices: block volumes are not supported"}},
		{"recursive read-only enabled", ctr(func(c *v1.Container) {
			c.VolumeMounts = []v1.VolumeMount{{Name: "v"}, {Name: "w", RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyEnabled)}}
		}), nil}, // decided at creation, from the runtime's features (mounts.go)
		{"recursive read-only if possible", ctr(func(c *v1.Container) {
			c.VolumeMounts = []v1.VolumeMount{{Name: "w", RecursiveReadOnly: ptr.To(v1.RecursiveReadOnlyIfPossible)}}
		}), nil},
		{"stop signal", ctr(func(c *v1.Container) { c.Lifecycle = &v1.Lifecycle{StopSignal: ptr.To(v1.SIGUSR1)} }),
			[]string{"spec.containers[1].lifecycle.stopSignal: container stop signals are not supported"}},
		{"restart rules", ctr(func(c *v1.Container) {
			c.RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}}
		}), []string{"spec.containers[1].restartPolicyRules: container restart rules are not supported"}},
		{"env from file", ctr(func(c *v1.Container) {
			c.Env = []v1.EnvVar{{Name: "A", Value: "a"}, {Name: "B", ValueFrom: &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{Key: "k"}}}}
		}), []string{"spec.containers[1].env[1].valueFrom.fileKeyRef: environment variables from files are not supported"}},
		{"supplemental groups policy strict", &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{
			SupplementalGroupsPolicy: ptr.To(v1.SupplementalGroupsPolicyStrict)}}},
			nil}, // decided by admission, from the runtime's features
		{"supplemental groups policy merge", &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{
			SupplementalGroupsPolicy: ptr.To(v1.SupplementalGroupsPolicyMerge)}}}, nil},
		{"hostname override", &v1.Pod{Spec: v1.PodSpec{HostnameOverride: ptr.To("h")}},
			[]string{"spec.hostnameOverride: hostname overrides are not supported"}},
		{"init container claim", &v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i",
			Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}}}}},
			[]string{"spec.initContainers[0].resources.claims: dynamic resource allocation is not supported"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unsupported(tc.pod); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Unsupported = %q\nwant %q", got, tc.want)
			}
		})
	}
}
