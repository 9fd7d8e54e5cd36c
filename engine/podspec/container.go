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
	// Labels and Annotations are the caller's identity of the container.
	Labels, Annotations map[string]string
}

// Container builds the CreateContainer config of r.Container. Errors name
// the pod, the container and the field.
func Container(n Node, r ContainerRequest) (*runtimeapi.ContainerConfig, error) {
	pod, c := r.Pod, r.Container
	envs, vars := environment(c)
	command := make([]string, len(c.Command))
	for i, a := range c.Command {
		command[i] = Expand(a, vars)
	}
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = Expand(a, vars)
	}
	mounts, err := containerMounts(n.RootDir, pod, c, vars)
	if err != nil {
		return nil, err
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
	return &runtimeapi.ContainerConfig{
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
			Resources: containerResources(pod, c, n.MemoryCapacity, n.static(pod)),
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: containerNamespaces(pod),
			},
		},
	}, nil
}

// containerNamespaces: a container shares its sandbox's network and IPC
// namespaces and has its own PID namespace, unless the pod asks for the
// node's network.
func containerNamespaces(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

// environment is the container's environment in declaration order, with
// $(VAR) references to earlier variables expanded, and the variables by
// name for expanding command and args.
func environment(c *v1.Container) ([]*runtimeapi.KeyValue, map[string]string) {
	envs := make([]*runtimeapi.KeyValue, 0, len(c.Env))
	vars := make(map[string]string, len(c.Env))
	for _, e := range c.Env {
		v := Expand(e.Value, vars) // later variables may refer to earlier ones
		vars[e.Name] = v
		envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(v)})
	}
	return envs, vars
}

// fieldErr is an error about one field of a container of a pod.
func fieldErr(pod *v1.Pod, c *v1.Container, field string, err error) error {
	return fmt.Errorf("pod %s/%s container %q: %s: %w", pod.Namespace, pod.Name, c.Name, field, err)
}
