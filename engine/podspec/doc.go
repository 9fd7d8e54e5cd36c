// Package podspec owns the translation of a pod spec into the CRI requests
// that run it: the sandbox config (namespaces, hostname, port mappings,
// pod resources) and each container's config (command and arguments with
// $(VAR) expansion, environment, mounts, resources, security context).
//
// Contracts:
//   - Every function is pure apart from reading what its Node names (the
//     volume directories it maps mounts to) and the termination message
//     files: Container creates each instance's empty file under RootDir
//     (termination.go), TerminationMessage reads it back after the exit.
//     Nothing here calls the runtime.
//   - Identity (labels, speclet's annotations) is the caller's: the engine
//     passes them in and reads them back after a restart.
//   - A field that cannot be honoured is an error naming the pod, the
//     container and the field, never a silent omission.
//
// # Usage
//
//	sb, err := podspec.Sandbox(node, podspec.SandboxRequest{Pod: pod, Attempt: 0,
//		Labels: labels, Annotations: ann})
//	cc, err := podspec.Container(node, podspec.ContainerRequest{Pod: pod,
//		Container: &pod.Spec.Containers[0], RestartCount: 0, ImageRef: ref,
//		Labels: labels, Annotations: ann})
package podspec
