package podspec

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/volume"
)

// containerMounts maps c's volume mounts to the host paths mount_volumes
// set up (engine/volume). subPath selects a path inside the volume (it may
// not leave it); configMap, secret, downwardAPI and projected volumes are
// always read-only, as under kubelet. An unknown volume or kind is an
// error naming the pod, container and volume.
func containerMounts(root string, pod *v1.Pod, c *v1.Container) ([]*runtimeapi.Mount, error) {
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
		if m.SubPathExpr != "" {
			return nil, fmt.Errorf("pod %s/%s container %q: volumeMounts %q: subPathExpr is not supported", pod.Namespace, pod.Name, c.Name, m.Name)
		}
		if m.SubPath != "" {
			p, err := volume.SubPath(host, m.SubPath)
			if err != nil {
				return nil, fmt.Errorf("pod %s/%s container %q: volumeMounts %q: %w", pod.Namespace, pod.Name, c.Name, m.Name, err)
			}
			host = p
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: m.MountPath, HostPath: host, Readonly: m.ReadOnly || volume.ReadOnlyKind(v)})
	}
	return mounts, nil
}
