package podspec

import (
	"fmt"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerRequest is one CreateContainer of a container of a pod.
type ContainerRequest struct {
	Pod       *v1.Pod
	Container *v1.Container
	// RestartCount is the instance's attempt (0 for the first).
	RestartCount int32
	// ImageRef is the pulled image's reference; "" sends Container.Image.
	ImageRef string
	// Init marks an init container (sidecars included).
	Init bool
	// UserNamespace is the pod's user namespace option (the sandbox's);
	// nil: none sent. A namespace of the pod's own maps every mount's IDs
	// with it.
	UserNamespace *runtimeapi.UserNamespace
	// Labels and Annotations are the caller's identity of the container.
	Labels, Annotations map[string]string
	// ImageUser is the image's user (ImageUserOf), for a container whose
	// security context names none (NeedsImageUser).
	ImageUser ImageUser
	// PodIPs are the pod's addresses (the node's for a hostNetwork pod),
	// HostIPs the node's: fieldRef status.* values, and the pod's
	// /etc/hosts (a pod without an address gets none).
	PodIPs, HostIPs []string
	// Objects reads the configMaps and secrets env and envFrom name; nil:
	// there is no API server, and any such reference is an error.
	Objects Objects
	// ServiceEnv are the service variables of the pod's namespace
	// (kubelet's getServiceEnvVarMap), set where the container sets none.
	ServiceEnv map[string]string
	// Devices are what the device plugins allocated to the container;
	// nil: none.
	Devices *DeviceRun
	// Runtime is what the pod's runtime handler supports, as the runtime
	// last reported it (RuntimeFeatures.Handler); the zero value supports
	// nothing.
	Runtime RuntimeHandler
}

// Container builds the CreateContainer config of r.Container. Errors name
// the pod, the container and the field.
func Container(n Node, r ContainerRequest) (*runtimeapi.ContainerConfig, error) {
	pod, c := r.Pod, r.Container
	envs, vars, err := environment(n, r)
	if err != nil {
		return nil, err
	}
	command := make([]string, len(c.Command))
	for i, a := range c.Command {
		command[i] = Expand(a, vars)
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = Expand(a, vars)
	}
	mounts, err := containerMounts(n.RootDir, pod, c, vars, r.Runtime.RecursiveReadOnlyMounts)
	if err != nil {
		return nil, err
	}
	security, err := containerSecurity(n, pod, c, r.ImageUser, containerNamespaces(pod))
	if err != nil {
		return nil, err
	}
	hosts, err := hostsMount(n, r)
	if err != nil {
		return nil, err
	}
	if hosts != nil {
		mounts = append(mounts, hosts)
	}
	term, err := terminationMount(n.RootDir, pod, c)
	if err != nil {
		return nil, err
	}
	if term != nil {
		mounts = append(mounts, term)
	}
	image := r.ImageRef
	if image == "" {
		image = c.Image
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(r.RestartCount)},
		Image:       &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image},
		Command:     command,
		Args:        args,
		WorkingDir:  c.WorkingDir,
		Envs:        envs,
		Mounts:      mounts,
		Labels:      r.Labels,
		Annotations: r.Annotations,
		LogPath:     filepath.Join(c.Name, strconv.Itoa(int(r.RestartCount))+".log"),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       containerResources(pod, c, n.MemoryCapacity, n.static(pod)),
			SecurityContext: security,
		},
	}
	withDevices(cfg, r.Devices)
	withUserNamespace(cfg, r.UserNamespace)
	return cfg, nil
}

// containerNamespaces are the pod's namespaces (kubelet's namespacesForPod
// serves the sandbox and every container): the node's network, PID or IPC
// namespace when the pod asks for it, one PID namespace for the whole pod
// with shareProcessNamespace, else a PID namespace of the container's own.
func containerNamespaces(pod *v1.Pod) *runtimeapi.NamespaceOption {
	return sandboxNamespaces(pod)
}

// fieldErr is an error about one field of a container of a pod.
func fieldErr(pod *v1.Pod, c *v1.Container, field string, err error) error {
	return fmt.Errorf("pod %s/%s container %q: %s: %w", pod.Namespace, pod.Name, c.Name, field, err)
}
