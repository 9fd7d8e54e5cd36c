package podspec

import runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

// withUserNamespace gives the container the pod's user namespace option u
// (the sandbox's, kubelet's namespacesForPod) and, when u is a namespace
// of the pod's own, u's ID mappings on every mount: idmapped mounts, so
// that files the node owns appear to the pod as owned by its own IDs
// (kubelet's applyPlatformSpecificContainerConfig).
func withUserNamespace(cfg *runtimeapi.ContainerConfig, u *runtimeapi.UserNamespace) {
	if u == nil {
		return
	}
	cfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions = u
	if u.Mode != runtimeapi.NamespaceMode_POD {
		return
	}
	for _, m := range cfg.Mounts {
		m.UidMappings, m.GidMappings = u.Uids, u.Gids
	}
}
