package podspec

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TargetNamespace puts the container of cfg into the process namespace of
// the runtime container targetID (an ephemeral container's
// targetContainerName), as kubelet does: only when the pod does not share
// one process namespace already (Pid CONTAINER); a pod sharing its process
// namespace, or the host's, keeps that.
func TargetNamespace(cfg *runtimeapi.ContainerConfig, targetID string) {
	if targetID == "" || cfg.Linux == nil || cfg.Linux.SecurityContext == nil {
		return
	}
	ns := cfg.Linux.SecurityContext.NamespaceOptions
	if ns == nil || ns.Pid != runtimeapi.NamespaceMode_CONTAINER {
		return
	}
	ns.Pid = runtimeapi.NamespaceMode_TARGET
	ns.TargetId = targetID
}
