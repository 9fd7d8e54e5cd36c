package podstatus

import (
	"reflect"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Equal reports whether two pod statuses are the same, field by field, as
// reflect.DeepEqual would except that a nil and an empty slice or map are
// equal, at a fraction of its cost for what Compute fills in. Times compare
// with ==: a time read again from a clock differs, so a false "not equal"
// only costs a publish. Fields Compute never sets are compared with
// reflect.DeepEqual when either side has one.
// TestEqualKnowsEveryField fails when the API adds a field it does not
// compare.
func Equal(a, b *v1.PodStatus) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	if a.ObservedGeneration != b.ObservedGeneration || a.Phase != b.Phase || a.Message != b.Message ||
		a.Reason != b.Reason || a.NominatedNodeName != b.NominatedNodeName || a.HostIP != b.HostIP ||
		a.PodIP != b.PodIP || a.QOSClass != b.QOSClass || a.Resize != b.Resize {
		return false
	}
	if !slices.Equal(a.Conditions, b.Conditions) || !slices.Equal(a.HostIPs, b.HostIPs) || !slices.Equal(a.PodIPs, b.PodIPs) {
		return false
	}
	if (a.StartTime == nil) != (b.StartTime == nil) || a.StartTime != nil && *a.StartTime != *b.StartTime {
		return false
	}
	if !slices.EqualFunc(a.InitContainerStatuses, b.InitContainerStatuses, containerEqual) ||
		!slices.EqualFunc(a.ContainerStatuses, b.ContainerStatuses, containerEqual) ||
		!slices.EqualFunc(a.EphemeralContainerStatuses, b.EphemeralContainerStatuses, containerEqual) {
		return false
	}
	return rareEqual(a.ResourceClaimStatuses, b.ResourceClaimStatuses, len(a.ResourceClaimStatuses) == 0 && len(b.ResourceClaimStatuses) == 0) &&
		rareEqual(a.ExtendedResourceClaimStatus, b.ExtendedResourceClaimStatus, a.ExtendedResourceClaimStatus == nil && b.ExtendedResourceClaimStatus == nil)
}

// containerEqual is Equal for one container status.
func containerEqual(a, b v1.ContainerStatus) bool {
	if a.Name != b.Name || a.Ready != b.Ready || a.RestartCount != b.RestartCount || a.Image != b.Image ||
		a.ImageID != b.ImageID || a.ContainerID != b.ContainerID {
		return false
	}
	if !stateEqual(&a.State, &b.State) || !stateEqual(&a.LastTerminationState, &b.LastTerminationState) || !ptrEqual(a.Started, b.Started) {
		return false
	}
	return rareEqual(a.AllocatedResources, b.AllocatedResources, len(a.AllocatedResources) == 0 && len(b.AllocatedResources) == 0) &&
		rareEqual(a.Resources, b.Resources, a.Resources == nil && b.Resources == nil) &&
		rareEqual(a.VolumeMounts, b.VolumeMounts, len(a.VolumeMounts) == 0 && len(b.VolumeMounts) == 0) &&
		rareEqual(a.User, b.User, a.User == nil && b.User == nil) &&
		rareEqual(a.AllocatedResourcesStatus, b.AllocatedResourcesStatus, len(a.AllocatedResourcesStatus) == 0 && len(b.AllocatedResourcesStatus) == 0) &&
		ptrEqual(a.StopSignal, b.StopSignal)
}

func stateEqual(a, b *v1.ContainerState) bool {
	return ptrEqual(a.Waiting, b.Waiting) && ptrEqual(a.Running, b.Running) && ptrEqual(a.Terminated, b.Terminated)
}

// ptrEqual: both nil, or both set to equal values.
func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// rareEqual compares a field Compute does not set: equal when both are
// empty, else as reflect.DeepEqual.
func rareEqual[T any](a, b T, bothEmpty bool) bool {
	return bothEmpty || reflect.DeepEqual(a, b)
}
