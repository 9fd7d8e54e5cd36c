package engine

import (
	"context"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/podspec"
)

// Devices is the device-plugin manager as the engine uses it
// (engine/devicemanager): the allocation of a pod's device resources at
// admission, kubelet's allocate-resources admit handler (it runs after the
// eviction handler and before the predicates), and what a container gets
// of them at its creation.
type Devices interface {
	// Allocate allocates pod's device resources; active are the pods
	// admitted before it and not terminated (the devices of any other pod
	// are freed), nil before the sources are ready (nothing is freed). Its
	// error refuses the pod (admission.AllocateFailed).
	Allocate(ctx context.Context, pod *v1.Pod, active []*v1.Pod) error
	// Forget frees the devices of a pod refused after its allocation.
	Forget(uid string)
	// RunOptions are the devices, mounts, envs, annotations and CDI
	// devices of c's allocation (nil: none); an error is the container's
	// CreateContainerConfigError.
	RunOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*podspec.DeviceRun, error)
}

// wantsDevices: a container of pod has a limit of an extended resource (a
// name with a domain other than kubernetes.io's), which a device plugin
// may serve.
func wantsDevices(pod *v1.Pod) bool {
	ext := func(cs []v1.Container) bool {
		for i := range cs {
			for name := range cs[i].Resources.Limits {
				if n := string(name); strings.Contains(n, "/") && !strings.Contains(n, v1.ResourceDefaultNamespacePrefix) {
					return true
				}
			}
		}
		return false
	}
	return ext(pod.Spec.InitContainers) || ext(pod.Spec.Containers)
}
