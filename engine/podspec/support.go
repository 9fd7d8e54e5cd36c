package podspec

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ReasonFieldNotSupported is the admission refusal of a pod that uses a
// field this node cannot honour (Unsupported).
const ReasonFieldNotSupported = "FieldNotSupported"

// Unsupported lists the fields of pod that speclet does not implement, each
// as "<field path>: <why>", in spec order; nil when speclet can run the pod
// as written. A pod with any of them is refused at admission rather than
// run with the field ignored (docs/pod-fields.md lists what is supported).
//
// Fields that only the scheduler or the API server act on (tolerations,
// topology spread, scheduling gates, priority, preemption) are not the
// node's and never listed.
func Unsupported(pod *v1.Pod) []string {
	var out []string
	add := func(field, format string, args ...any) {
		out = append(out, field+": "+fmt.Sprintf(format, args...))
	}
	s := &pod.Spec
	if len(s.ResourceClaims) > 0 {
		add("spec.resourceClaims", "dynamic resource allocation is not supported")
	}
	if s.HostnameOverride != nil {
		add("spec.hostnameOverride", "hostname overrides are not supported")
	}
	for i := range s.Volumes {
		v := &s.Volumes[i]
		if kind := unsupportedVolume(&v.VolumeSource); kind != "" {
			add(fmt.Sprintf("spec.volumes[%d]", i), "volume %q: volume type %s is not supported", v.Name, kind)
		}
	}
	each := func(field string, c *v1.Container) {
		if len(c.VolumeDevices) > 0 {
			add(field+".volumeDevices", "block volumes are not supported")
		}
		if len(c.Resources.Claims) > 0 {
			add(field+".resources.claims", "dynamic resource allocation is not supported")
		}
		if c.Lifecycle != nil && c.Lifecycle.StopSignal != nil {
			add(field+".lifecycle.stopSignal", "container stop signals are not supported")
		}
		if len(c.RestartPolicyRules) > 0 {
			add(field+".restartPolicyRules", "container restart rules are not supported")
		}
		for j, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.FileKeyRef != nil {
				add(fmt.Sprintf("%s.env[%d].valueFrom.fileKeyRef", field, j), "environment variables from files are not supported")
			}
		}
	}
	for i := range s.InitContainers {
		each(fmt.Sprintf("spec.initContainers[%d]", i), &s.InitContainers[i])
	}
	for i := range s.Containers {
		each(fmt.Sprintf("spec.containers[%d]", i), &s.Containers[i])
	}
	for i := range s.EphemeralContainers {
		c := v1.Container(s.EphemeralContainers[i].EphemeralContainerCommon)
		each(fmt.Sprintf("spec.ephemeralContainers[%d]", i), &c)
	}
	return out
}

// UnsupportedMessage is the refusal message for the fields Unsupported
// listed.
func UnsupportedMessage(fields []string) string {
	return "Pod uses what this node does not support: " + strings.Join(fields, "; ")
}

// unsupportedVolume names the volume type of src when engine/volume cannot
// set it up, or "".
func unsupportedVolume(src *v1.VolumeSource) string {
	switch {
	case src.EmptyDir != nil, src.HostPath != nil, src.ConfigMap != nil, src.Secret != nil,
		src.DownwardAPI != nil, src.Projected != nil:
		return ""
	case src.PersistentVolumeClaim != nil:
		return "persistentVolumeClaim"
	case src.Ephemeral != nil:
		return "ephemeral"
	case src.CSI != nil:
		return "csi"
	case src.Image != nil:
		return "image"
	case src.NFS != nil:
		return "nfs"
	case src.ISCSI != nil:
		return "iscsi"
	case src.GitRepo != nil:
		return "gitRepo"
	}
	return "other than emptyDir, hostPath, configMap, secret, downwardAPI and projected"
}
