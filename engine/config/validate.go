// Pod validation: what a manifest must hold to be run (kubelet's
// validation of static pods).

package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validatePod checks what the engine needs to run the pod and reports every
// problem, each naming its field.
func validatePod(pod *v1.Pod, origin, nodeName string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ManifestError{Origin: origin, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	switch {
	case pod.Name == "":
		bad("metadata.name", "required")
	default:
		for _, m := range validation.IsDNS1123Subdomain(pod.Name) {
			bad("metadata.name", "%q: %s", pod.Name, m)
		}
		if full := staticPodName(pod.Name, nodeName); len(full) > validation.DNS1123SubdomainMaxLength {
			bad("metadata.name", "%q: with the node name the pod name %q is longer than %d characters", pod.Name, full, validation.DNS1123SubdomainMaxLength)
		}
	}
	if pod.Namespace != "" {
		for _, m := range validation.IsDNS1123Label(pod.Namespace) {
			bad("metadata.namespace", "%q: %s", pod.Namespace, m)
		}
	}
	if pod.UID != "" {
		// The UID names directories under --root-dir and a CRI label.
		for _, m := range validation.IsValidLabelValue(string(pod.UID)) {
			bad("metadata.uid", "%q: %s", truncate(string(pod.UID), 80), m)
		}
	}
	fieldErrs := metavalidation.ValidateLabels(pod.Labels, field.NewPath("metadata", "labels"))
	fieldErrs = append(fieldErrs, apivalidation.ValidateAnnotations(pod.Annotations, field.NewPath("metadata", "annotations"))...)
	for _, fe := range fieldErrs {
		msg := fe.ErrorBody()
		if fe.Type == field.ErrorTypeTooLong {
			// The value is the whole map: name the limit, not the data.
			msg = fmt.Sprintf("annotations take %d bytes, more than the %d bytes (256 KiB) allowed", annotationBytes(pod.Annotations), MaxAnnotationBytes)
		} else if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		bad(fe.Field, "%s", msg)
	}
	if n := len(pod.Spec.InitContainers) + len(pod.Spec.Containers); n > MaxContainers {
		bad("spec.containers", "%d init and regular containers, more than the %d speclet runs in one pod", n, MaxContainers)
	}
	s := &pod.Spec
	switch s.RestartPolicy {
	case "", v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	default:
		bad("spec.restartPolicy", "%q: want Always, OnFailure or Never", s.RestartPolicy)
	}
	if g := s.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		bad("spec.terminationGracePeriodSeconds", "%d: must not be negative", *g)
	}
	if d := s.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		bad("spec.activeDeadlineSeconds", "%d: must be positive", *d)
	}
	if len(s.Containers) == 0 {
		bad("spec.containers", "required: a pod needs at least one container")
	}
	names := map[string]string{}
	check := func(field string, c *v1.Container, init bool) {
		if c.Name == "" {
			bad(field+".name", "required")
		} else {
			for _, m := range validation.IsDNS1123Label(c.Name) {
				bad(field+".name", "%q: %s", c.Name, m)
			}
			if prev, dup := names[c.Name]; dup {
				bad(field+".name", "%q: duplicate of %s", c.Name, prev)
			} else {
				names[c.Name] = field
			}
		}
		if strings.TrimSpace(c.Image) == "" {
			bad(field+".image", "required")
		} else if len(c.Image) > MaxImageLength {
			bad(field+".image", "%d characters, more than the %d an image reference may have", len(c.Image), MaxImageLength)
		}
		switch c.ImagePullPolicy {
		case "", v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
		default:
			bad(field+".imagePullPolicy", "%q: want Always, IfNotPresent or Never", c.ImagePullPolicy)
		}
		if c.RestartPolicy != nil {
			switch {
			case !init:
				bad(field+".restartPolicy", "only init containers may set a restart policy")
			case *c.RestartPolicy != v1.ContainerRestartPolicyAlways:
				bad(field+".restartPolicy", "%q: an init container may only say Always (a sidecar)", *c.RestartPolicy)
			}
		}
		for j, p := range c.Ports {
			pf := fmt.Sprintf("%s.ports[%d]", field, j)
			for _, m := range validation.IsValidPortNum(int(p.ContainerPort)) {
				bad(pf+".containerPort", "%d: %s", p.ContainerPort, m)
			}
			if p.HostPort != 0 {
				for _, m := range validation.IsValidPortNum(int(p.HostPort)) {
					bad(pf+".hostPort", "%d: %s", p.HostPort, m)
				}
			}
			switch p.Protocol {
			case "", v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
			default:
				bad(pf+".protocol", "%q: want TCP, UDP or SCTP", p.Protocol)
			}
		}
	}
	for i := range s.InitContainers {
		check(fmt.Sprintf("spec.initContainers[%d]", i), &s.InitContainers[i], true)
	}
	for i := range s.Containers {
		check(fmt.Sprintf("spec.containers[%d]", i), &s.Containers[i], false)
	}
	if len(s.EphemeralContainers) > 0 {
		bad("spec.ephemeralContainers", "not supported in static pods")
	}
	for i := range s.Volumes {
		if hp := s.Volumes[i].HostPath; hp != nil {
			for _, fe := range validateHostPath(hp, field.NewPath("spec", "volumes").Index(i).Child("hostPath")) {
				bad(fe.Field, "%s", fe.ErrorBody())
			}
		}
	}
	for _, fe := range validateHostUsers(s) {
		bad(fe.Field, "%s", fe.ErrorBody())
	}
	return errors.Join(errs...)
}

// validateHostUsers is the API server's validateHostUsers, which kubelet
// also applies to static pods: a pod in a user namespace of its own
// (hostUsers: false) may not share the node's network, PID or IPC
// namespace, nor have block volumes (neither takes an ID mapping).
func validateHostUsers(s *v1.PodSpec) field.ErrorList {
	if s.HostUsers == nil || *s.HostUsers {
		return nil
	}
	const why = "when `hostUsers` is false"
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if s.HostNetwork {
		errs = append(errs, field.Forbidden(spec.Child("hostNetwork"), why))
	}
	if s.HostPID {
		errs = append(errs, field.Forbidden(spec.Child("hostPID"), why))
	}
	if s.HostIPC {
		errs = append(errs, field.Forbidden(spec.Child("hostIPC"), why))
	}
	for i := range s.InitContainers {
		if len(s.InitContainers[i].VolumeDevices) > 0 {
			errs = append(errs, field.Forbidden(spec.Child("initContainers").Index(i).Child("volumeDevices"), why))
		}
	}
	for i := range s.Containers {
		if len(s.Containers[i].VolumeDevices) > 0 {
			errs = append(errs, field.Forbidden(spec.Child("containers").Index(i).Child("volumeDevices"), why))
		}
	}
	return errs
}

// hostPathTypes are the hostPath types the API accepts.
var hostPathTypes = []string{"", string(v1.HostPathDirectoryOrCreate), string(v1.HostPathDirectory),
	string(v1.HostPathFileOrCreate), string(v1.HostPathFile), string(v1.HostPathSocket),
	string(v1.HostPathCharDev), string(v1.HostPathBlockDev)}

// validateHostPath is the API server's validateHostPathVolumeSource, which
// kubelet also applies to static pods: a path is required, has no ".."
// element (validatePathNoBacksteps: "/srv/data/../../etc" would mount /etc)
// and the type is one the API knows. The errors are kubelet's, word for word.
func validateHostPath(hp *v1.HostPathVolumeSource, fld *field.Path) field.ErrorList {
	if hp.Path == "" {
		return field.ErrorList{field.Required(fld.Child("path"), "")}
	}
	var errs field.ErrorList
	for _, part := range strings.Split(filepath.ToSlash(hp.Path), "/") {
		if part == ".." {
			errs = append(errs, field.Invalid(fld.Child("path"), hp.Path, "must not contain '..'"))
			break
		}
	}
	if hp.Type != nil && !slices.Contains(hostPathTypes, string(*hp.Type)) {
		errs = append(errs, field.NotSupported(fld.Child("type"), *hp.Type, hostPathTypes))
	}
	return errs
}

func annotationBytes(a map[string]string) int {
	n := 0
	for k, v := range a {
		n += len(k) + len(v)
	}
	return n
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
