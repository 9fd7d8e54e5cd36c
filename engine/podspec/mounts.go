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
// the runtime's propagation. An unknown volume or kind is an error naming
// the pod, container and volume.
func containerMounts(root string, pod *v1.Pod, c *v1.Container, vars map[string]string) ([]*runtimeapi.Mount, error) {
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
		// recursiveReadOnly: Enabled is refused at admission (Unsupported);
		// IfPossible is a plain read-only mount on this runtime.
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: m.MountPath, HostPath: host, Readonly: m.ReadOnly || volume.ReadOnlyKind(v), Propagation: prop})
	}
	return mounts, nil
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
