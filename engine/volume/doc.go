// Package volume sets up and tears down the volumes of a pod on the node, as
// kubelet's volume plugins do: emptyDir (a directory, or a tmpfs for
// medium Memory), hostPath with its type checks, and the API-backed kinds
// configMap, secret, downwardAPI and projected, whose files are written by
// an AtomicWriter (kubelet's "..data" symlink swap).
//
// Layout under the agent's root directory, as kubelet's:
//
//	<root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>
//	<root>/pods/<uid>/volumes/kubernetes.io~configmap/<volume>
//	<root>/pods/<uid>/volumes/kubernetes.io~secret/<volume>
//	<root>/pods/<uid>/volumes/kubernetes.io~downward-api/<volume>
//	<root>/pods/<uid>/volumes/kubernetes.io~projected/<volume>
//
// hostPath volumes are used in place. Secret and projected volumes, and
// emptyDir volumes with medium Memory, are tmpfs mounts (mounting needs
// CAP_SYS_ADMIN); TearDown unmounts every mount under a pod's directory
// before the directory is removed, so a pod removed while the agent was
// down is cleaned up the same way.
//
// The package holds no lifecycle: the engine's pod machine runs Setup from
// its mount_volumes action and TearDown from unmount_volumes
// (spec/pod.hcl).
package volume
