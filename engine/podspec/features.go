package podspec

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeFeatures is what the runtime's Status says it supports (kubelet's
// kubecontainer.RuntimeStatus: its handlers and its features). The engine
// reads it when it starts and at every runtime check; a nil
// *RuntimeFeatures (not read yet) supports nothing.
type RuntimeFeatures struct {
	// Handlers are the runtime handlers the runtime lists; none (as
	// containerd 1.6 lists none) is, as under kubelet, no handler
	// supporting anything.
	Handlers []RuntimeHandler
	// SupplementalGroupsPolicy: the runtime honours a pod's
	// supplementalGroupsPolicy (Strict) and reports a container's user in
	// ContainerStatus (KEP-3619).
	SupplementalGroupsPolicy bool
	// NoFeatures: the Status reply carried no runtime features at all
	// (containerd 1.6), which the Node's status.features then omits.
	NoFeatures bool
}

// RuntimeHandler is one runtime handler's features.
type RuntimeHandler struct {
	// Name is the handler's name; "" is the runtime's default handler.
	Name string
	// RecursiveReadOnlyMounts: a read-only mount can be made read-only
	// recursively (its submounts too).
	RecursiveReadOnlyMounts bool
	// UserNamespaces: a pod can run in a user namespace (hostUsers: false).
	UserNamespaces bool
}

// RuntimeFeaturesOf is kubelet's toKubeRuntimeStatus of a Status reply:
// each listed handler with its features, and the runtime's.
func RuntimeFeaturesOf(st *runtimeapi.StatusResponse) *RuntimeFeatures {
	f := &RuntimeFeatures{SupplementalGroupsPolicy: st.GetFeatures().GetSupplementalGroupsPolicy(), NoFeatures: st.GetFeatures() == nil}
	for _, h := range st.GetRuntimeHandlers() {
		f.Handlers = append(f.Handlers, RuntimeHandler{Name: h.GetName(),
			RecursiveReadOnlyMounts: h.GetFeatures().GetRecursiveReadOnlyMounts(),
			UserNamespaces:          h.GetFeatures().GetUserNamespaces()})
	}
	return f
}

// Handler is the features of the handler named name ("" the default
// handler); a handler the runtime does not list supports nothing
// (kubelet's runtimeHandlerSupportsRecursiveReadOnlyMounts).
func (f *RuntimeFeatures) Handler(name string) RuntimeHandler {
	if f != nil {
		for _, h := range f.Handlers {
			if h.Name == name {
				return h
			}
		}
	}
	return RuntimeHandler{Name: name}
}

// SupportsSupplementalGroupsPolicy is f.SupplementalGroupsPolicy; false
// while f is nil.
func (f *RuntimeFeatures) SupportsSupplementalGroupsPolicy() bool {
	return f != nil && f.SupplementalGroupsPolicy
}

// NodeStatus is what the Node's status shows of f (kubelet's NodeFeatures
// and RuntimeHandlers setters): status.features, and
// status.runtimeHandlers in the runtime's order. A nil f shows neither;
// features without any from the runtime (NoFeatures) show no
// status.features.
func (f *RuntimeFeatures) NodeStatus() (*v1.NodeFeatures, []v1.NodeRuntimeHandler) {
	if f == nil {
		return nil, nil
	}
	var features *v1.NodeFeatures
	if !f.NoFeatures {
		sgp := f.SupplementalGroupsPolicy
		features = &v1.NodeFeatures{SupplementalGroupsPolicy: &sgp}
	}
	handlers := make([]v1.NodeRuntimeHandler, len(f.Handlers))
	for i, h := range f.Handlers {
		rro, userns := h.RecursiveReadOnlyMounts, h.UserNamespaces
		handlers[i] = v1.NodeRuntimeHandler{Name: h.Name, Features: &v1.NodeRuntimeHandlerFeatures{
			RecursiveReadOnlyMounts: &rro, UserNamespaces: &userns}}
	}
	return features, handlers
}
