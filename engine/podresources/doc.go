// Package podresources serves kubelet's pod-resources API: the gRPC
// services k8s.io/kubelet/pkg/apis/podresources v1 (List,
// GetAllocatableResources, Get) and v1alpha1 (List), on the unix socket
// <root-dir>/pod-resources/kubelet.sock, as kubelet v1.34 serves them.
// Monitoring agents (GPU exporters among them) read it to map a node's
// devices and CPUs to its pods.
//
// What kubelet v1.34.4 answers, and so this package:
//   - List: the active pods (kubelet's GetActivePods, its feature gate
//     KubeletPodResourcesListUseActivePods being on by default since 1.34:
//     a pod whose worker stopped, or which admission refused, is not
//     listed; one in a terminal phase is while it is still being stopped),
//     each with its restartable (sidecar) init containers and then its
//     containers, in spec order.
//   - Get (KubeletPodResourcesGet, on by default since 1.34): any pod the
//     node's sources declare, by namespace and name, whatever its phase;
//     an unknown pod is the error "pod NAME in namespace NS not found"
//     (gRPC code Unknown, as kubelet returns a plain error).
//   - CPU ids and memory come from kubelet's CPU and memory managers. This
//     node has neither: it answers as kubelet does with their "none"
//     policies, no exclusive CPUs and no memory blocks, for a container and
//     for GetAllocatableResources alike. Dynamic resources
//     (KubeletPodResourcesDynamicResources) are empty: the node refuses
//     pods with resource claims.
//   - Devices come from Config.Devices, the device-plugin manager, when
//     set; without one there are none.
//   - Every unary call goes through kubelet's rate limit: a token bucket of
//     100 per second with a burst of 10, shared by all callers; a call over
//     it gets codes.ResourceExhausted "rejected by rate limit".
//   - kubelet's request counters (kubelet_pod_resources_endpoint_*, by
//     server_api_version) on Config.Registerer.
package podresources
