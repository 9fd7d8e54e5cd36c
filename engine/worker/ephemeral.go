package worker

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/podspec"
)

// Ephemeral containers (kubectl debug) are added to a running API pod
// through the pods/ephemeralcontainers subresource; the pod update carries
// them in spec.ephemeralContainers. As under kubelet, each runs on the
// container machine like any other container, except that:
//   - it starts at the next sync of the pod, before init containers and
//     whether or not the pod is initialized (guard start_blocked);
//   - it never restarts, whatever the restart policy, and a spec change
//     does not restart it (guards restart_allowed, spec_changed);
//   - it is stopped only with the pod;
//   - it is reported in status.ephemeralContainerStatuses, never ready, and
//     counts neither for the pod's phase nor for its conditions;
//   - with targetContainerName it joins the target container's process
//     namespace (CRI NamespaceMode TARGET).
//
// Static pods cannot have them (engine/config refuses the field), as the
// subresource exists only in the API server.

// ephemeralContainer is the container spec of an ephemeral container: the
// same fields as a container (EphemeralContainerCommon).
func ephemeralContainer(ec *v1.EphemeralContainer) *v1.Container {
	c := v1.Container(ec.EphemeralContainerCommon)
	return &c
}

// BuildConfig is the CreateContainer config of the next instance (with
// the pod's inputs, requestInputs, and the image's user where a
// runAsNonRoot check needs it); for an ephemeral container it also names
// the process namespace of its target.
func (c *ctrState) BuildConfig(restartCount int32, inputs func(*podspec.ContainerRequest), user podspec.ImageUser) (*runtimeapi.ContainerConfig, error) {
	devices, err := c.devices()
	if err != nil {
		return nil, err
	}
	cfg, err := containerConfig(c.p.h.Node, c.p.pod, c.spec, restartCount, c.ImageRef(), c.init, user, inputs,
		func(r *podspec.ContainerRequest) { r.Devices, r.Runtime = devices, c.p.runtimeHandler() })
	if err != nil || !c.ephemeral {
		return cfg, err
	}
	ec := c.ephemeralSpec()
	if ec == nil {
		return nil, fmt.Errorf("pod %s: ephemeral container %q is not in the pod spec", c.p.key(), c.name)
	}
	// Admission checked the containers the pod had then; this one came
	// with an update.
	if fields := podspec.Unsupported(&v1.Pod{Spec: v1.PodSpec{EphemeralContainers: []v1.EphemeralContainer{*ec}}}); len(fields) > 0 {
		return nil, fmt.Errorf("pod %s: ephemeral container %q: %s", c.p.key(), c.name,
			strings.ReplaceAll(strings.Join(fields, "; "), "spec.ephemeralContainers[0]", "spec.ephemeralContainers["+c.name+"]"))
	}
	if t := ec.TargetContainerName; t != "" {
		target := c.p.byName(t)
		if target == nil || target.ephemeral || target.ID() == "" {
			return nil, fmt.Errorf("pod %s: ephemeral container %q: target container %q not found", c.p.key(), c.name, t)
		}
		podspec.TargetNamespace(cfg, target.ID())
	}
	return cfg, nil
}

// devices are what the device plugins give the next instance (kubelet's
// GetDeviceRunContainerOptions, PreStartContainer included); an ephemeral
// container has no resources.
func (c *ctrState) devices() (*podspec.DeviceRun, error) {
	if c.p.h.Devices == nil || c.ephemeral {
		return nil, nil
	}
	d, err := c.p.h.Devices(c.p.h.Engine.Context(), c.p.pod, c.spec)
	if err != nil {
		return nil, fmt.Errorf("pod %s container %q: devices: %w", c.p.key(), c.name, err)
	}
	return d, nil
}

// ephemeralSpec is the pod spec's entry of this ephemeral container.
func (c *ctrState) ephemeralSpec() *v1.EphemeralContainer {
	for i := range c.p.pod.Spec.EphemeralContainers {
		if ec := &c.p.pod.Spec.EphemeralContainers[i]; ec.Name == c.name {
			return ec
		}
	}
	return nil
}
