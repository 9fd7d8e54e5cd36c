package podresources

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
)

// Pods is what the server reads of the node's pods. The server does not
// modify what they return.
type Pods interface {
	// ActivePods are the pods List answers: kubelet's GetActivePods (the
	// declared pods neither refused at admission nor stopped).
	ActivePods() []*v1.Pod
	// Pods are every pod the node's sources declare, with its status
	// (kubelet's pod manager): Get looks a pod up among them.
	Pods() []*v1.Pod
}

// Devices is the device-plugin manager's view the server reads: the
// devices allocated to a container, and every device the node has.
type Devices interface {
	ContainerDevices(podUID, containerName string) []*podresourcesv1.ContainerDevices
	AllocatableDevices() []*podresourcesv1.ContainerDevices
}

// v1Lister is the v1 PodResourcesLister service.
type v1Lister struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	pods    Pods
	devices Devices // nil: no devices
	m       *counters
}

func (l *v1Lister) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	l.m.requests("v1", l.m.list)
	pods := l.pods.ActivePods()
	out := make([]*podresourcesv1.PodResources, len(pods))
	for i, p := range pods {
		out[i] = l.podResources(p)
	}
	return &podresourcesv1.ListPodResourcesResponse{PodResources: out}, nil
}

// GetAllocatableResources answers the devices of the device-plugin
// manager; the CPU ids and memory of the "none" CPU and memory manager
// policies are none.
func (l *v1Lister) GetAllocatableResources(ctx context.Context, _ *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	l.m.requests("v1", l.m.getAllocatable)
	resp := &podresourcesv1.AllocatableResourcesResponse{CpuIds: []int64{}, Memory: []*podresourcesv1.ContainerMemory{}}
	if l.devices != nil {
		resp.Devices = l.devices.AllocatableDevices()
	}
	return resp, nil
}

func (l *v1Lister) Get(ctx context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	l.m.requests("v1", l.m.get)
	for _, p := range l.pods.Pods() {
		if p.Namespace == req.PodNamespace && p.Name == req.PodName {
			return &podresourcesv1.GetPodResourcesResponse{PodResources: l.podResources(p)}, nil
		}
	}
	l.m.getErrors.WithLabelValues("v1").Inc()
	// kubelet's words, a plain error: gRPC code Unknown
	return nil, fmt.Errorf("pod %s in namespace %s not found", req.PodName, req.PodNamespace)
}

// podResources is a pod's entry: its restartable init containers, then its
// containers, each with its devices and no exclusive CPUs or memory.
func (l *v1Lister) podResources(p *v1.Pod) *podresourcesv1.PodResources {
	res := &podresourcesv1.PodResources{Name: p.Name, Namespace: p.Namespace,
		Containers: make([]*podresourcesv1.ContainerResources, 0, len(p.Spec.InitContainers)+len(p.Spec.Containers))}
	for i := range p.Spec.InitContainers {
		if c := &p.Spec.InitContainers[i]; restartable(c) {
			res.Containers = append(res.Containers, l.containerResources(p, c.Name))
		}
	}
	for i := range p.Spec.Containers {
		res.Containers = append(res.Containers, l.containerResources(p, p.Spec.Containers[i].Name))
	}
	return res
}

func (l *v1Lister) containerResources(p *v1.Pod, name string) *podresourcesv1.ContainerResources {
	c := &podresourcesv1.ContainerResources{Name: name, CpuIds: []int64{}, Memory: []*podresourcesv1.ContainerMemory{},
		DynamicResources: []*podresourcesv1.DynamicResource{}}
	if l.devices != nil {
		c.Devices = l.devices.ContainerDevices(string(p.UID), name)
	}
	return c
}

// restartable: a sidecar, an init container with restartPolicy Always.
func restartable(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// v1alpha1Lister is the v1alpha1 service kubelet v1.34 still serves: List
// only, over every declared pod (not the active ones), its containers
// without init containers, and their devices' resource names and ids.
type v1alpha1Lister struct {
	v1alpha1.UnimplementedPodResourcesListerServer
	pods    Pods
	devices Devices
	m       *counters
}

func (l *v1alpha1Lister) List(ctx context.Context, _ *v1alpha1.ListPodResourcesRequest) (*v1alpha1.ListPodResourcesResponse, error) {
	l.m.requests("v1alpha1", nil)
	pods := l.pods.Pods()
	out := make([]*v1alpha1.PodResources, len(pods))
	for i, p := range pods {
		res := &v1alpha1.PodResources{Name: p.Name, Namespace: p.Namespace,
			Containers: make([]*v1alpha1.ContainerResources, len(p.Spec.Containers))}
		for j, c := range p.Spec.Containers {
			res.Containers[j] = &v1alpha1.ContainerResources{Name: c.Name}
			if l.devices == nil {
				continue
			}
			for _, d := range l.devices.ContainerDevices(string(p.UID), c.Name) {
				res.Containers[j].Devices = append(res.Containers[j].Devices,
					&v1alpha1.ContainerDevices{ResourceName: d.ResourceName, DeviceIds: d.DeviceIds})
			}
		}
		out[i] = res
	}
	return &v1alpha1.ListPodResourcesResponse{PodResources: out}, nil
}
