package engine

import (
	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/cgroups"
	"github.com/speclet/speclet/engine/volume"
)

// nodeAllocatable is what a downward API limits.* falls back to for a
// container without a limit: node allocatable (Config.Allocatable), as
// kubelet's, or the machine's capacity when the engine has none.
func nodeAllocatable(alloc v1.ResourceList) volume.Node {
	if alloc == nil {
		alloc, _ = cgroups.MachineCapacity("")
	}
	return volume.Node{CPU: alloc[v1.ResourceCPU], Memory: alloc[v1.ResourceMemory]}
}

// podAllocatable is what an env resourceFieldRef limits.* of a container
// without a limit falls back to: node allocatable, or the machine's
// capacity when the engine has none (engine/podspec.Node.Allocatable).
func podAllocatable(alloc v1.ResourceList) v1.ResourceList {
	if alloc == nil {
		alloc, _ = cgroups.MachineCapacity("")
	}
	return alloc
}
