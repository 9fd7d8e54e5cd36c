package podspec

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/volume"
)

// containerMounts maps c's volume mounts to the host paths mount_volumes
// set up (engine/volume). subPath selects a path inside the volume (it may
// not leave it); subPathExpr is a subPath with $(VAR) references to the
// container's environment vars expanded (a variable without a value is an
// error, as under kubelet); configMap, secret, downwardAPI and projected
// volumes are always read-only, as under kubelet; mountPropagation maps to
// the runtime's propagation; recursiveReadOnly resolves against whether
// the pod's runtime handler supports recursive read-only mounts (rro). An
// unknown volume or kind is an error naming the pod, container and volume;
// a recursiveReadOnly that cannot be honoured is a *ConfigError with
// kubelet's message.
func containerMounts(root string, pod *v1.Pod, c *v1.Container, vars map[string]string, rro bool) ([]*runtimeapi.Mount, error) {
	if len(c.VolumeMounts) == 0 {
		return nil, nil
	}
	vols := make(map[string]*v1.Volume, len(pod.Spec.Volumes))
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var mounts []*runtimeapi.Mount
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			return nil, fmt.Errorf("pod %s/%s container %q: volumeMounts %q: no such volume", pod.Namespace, pod.Name, c.Name, m.Name)
		}
		host := volume.HostPath(root, pod, v)
		if host == "" {
			return nil, fmt.Errorf("pod %s/%s volume %q: volume type %q is not supported", pod.Namespace, pod.Name, v.Name, volume.Type(&v.VolumeSource))
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			var missing []string
			sub = expandWith(m.SubPathExpr, func(name string) (string, bool) {
				v, ok := vars[name]
				if !ok || v == "" {
					missing = append(missing, name)
				}
				return v, true
			})
			if len(missing) > 0 {
				slices.Sort(missing)
				return nil, fmt.Errorf("pod %s/%s container %q: volumeMounts %q: subPathExpr %q: missing value for %s", pod.Namespace, pod.Name, c.Name, m.Name, m.SubPathExpr, strings.Join(slices.Compact(missing), ", "))
			}
		}
		if sub != "" {
			p, err := volume.SubPath(host, sub)
			if err != nil {
				return nil, fmt.Errorf("pod %s/%s container %q: volumeMounts %q: %w", pod.Namespace, pod.Name, c.Name, m.Name, err)
			}
			host = p
		}
		prop, err := propagation(m.MountPropagation)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s container %q: volumeMounts %q: %w", pod.Namespace, pod.Name, c.Name, m.Name, err)
		}
		recursive, err := ResolveRecursiveReadOnly(m, rro)
		if err != nil {
			return nil, &ConfigError{Pod: pod.Namespace + "/" + pod.Name, Container: c.Name, Err: fmt.Errorf("failed to resolve recursive read-only mode: %w", err)}
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: m.MountPath, HostPath: host, Readonly: m.ReadOnly || volume.ReadOnlyKind(v),
			RecursiveReadOnly: recursive, Propagation: prop})
	}
	return mounts, nil
}

// ResolveRecursiveReadOnly is kubelet's resolveRecursiveReadOnly: whether
// mount m is made read-only recursively when the runtime handler supports
// that (rro) or not. Unset and Disabled: no; IfPossible: when supported;
// Enabled: yes, and an error when not supported. Either needs a read-only
// mount without propagation (the API server checks that too; a static
// pod's spec is checked here).
func ResolveRecursiveReadOnly(m v1.VolumeMount, rro bool) (bool, error) {
	if m.RecursiveReadOnly == nil || *m.RecursiveReadOnly == v1.RecursiveReadOnlyDisabled {
		return false, nil
	}
	if !m.ReadOnly {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not read-only", m.Name)
	}
	if m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not compatible with propagation %q", m.Name, *m.MountPropagation)
	}
	switch *m.RecursiveReadOnly {
	case v1.RecursiveReadOnlyIfPossible:
		return rro, nil
	case v1.RecursiveReadOnlyEnabled:
		if !rro {
			return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not supported by the runtime", m.Name)
		}
		return true, nil
	}
	return false, fmt.Errorf("unknown recursive read-only mode %q", *m.RecursiveReadOnly)
}

// VolumeMountStatuses is kubelet's status.volumeMounts of container c
// (convertToAPIContainerStatuses): each volume mount's name, path and
// readOnly, and for a read-only one its recursiveReadOnly resolved against
// rro (Enabled or Disabled; Disabled when it cannot be resolved); nil for
// a container without volume mounts.
func VolumeMountStatuses(c *v1.Container, rro bool) []v1.VolumeMountStatus {
	if len(c.VolumeMounts) == 0 {
		return nil
	}
	out := make([]v1.VolumeMountStatus, len(c.VolumeMounts))
	for i, m := range c.VolumeMounts {
		out[i] = v1.VolumeMountStatus{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly}
		if m.ReadOnly {
			mode := v1.RecursiveReadOnlyDisabled
			if b, err := ResolveRecursiveReadOnly(m, rro); err == nil && b {
				mode = v1.RecursiveReadOnlyEnabled
			}
			out[i].RecursiveReadOnly = &mode
		}
	}
	return out
}

// propagation is kubelet's translateMountPropagation: None (or unset) is
// private, HostToContainer rslave, Bidirectional rshared (the API server
// allows it only in privileged containers).
func propagation(mode *v1.MountPropagationMode) (runtimeapi.MountPropagation, error) {
	switch {
	case mode == nil, *mode == v1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case *mode == v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case *mode == v1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	}
	return 0, fmt.Errorf("mountPropagation: invalid mode %q", *mode)
}
