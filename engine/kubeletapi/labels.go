package kubeletapi

import (
	"context"
	"sort"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The CRI labels of a runtime object: the agent's own (Config.Labels), and
// where an object has no own pod UID label, another agent's
// (Config.Fallback: kubelet's io.kubernetes.* on the containers of a static
// pod kubelet started and speclet adopted). An object is read under one
// set, never a mix of both; it is found under either.

// labelsOf is the label set an object with labels m is read under.
func (a *API) labelsOf(m map[string]string) Labels {
	if _, ok := m[a.c.Labels.PodUID]; ok || a.c.Fallback.PodUID == "" {
		return a.c.Labels
	}
	return a.c.Fallback
}

// podUID, podName, podNamespace and containerName read an object's labels
// (labelsOf).
func (a *API) podUID(m map[string]string) string       { return m[a.labelsOf(m).PodUID] }
func (a *API) podName(m map[string]string) string      { return m[a.labelsOf(m).PodName] }
func (a *API) podNamespace(m map[string]string) string { return m[a.labelsOf(m).PodNamespace] }
func (a *API) containerName(m map[string]string) string {
	return m[a.labelsOf(m).ContainerName]
}

// labelSets are the label sets objects are found by: Labels, then
// Fallback when set.
func (a *API) labelSets() []Labels {
	if a.c.Fallback.PodUID == "" {
		return []Labels{a.c.Labels}
	}
	return []Labels{a.c.Labels, a.c.Fallback}
}

// containerIDs returns the runtime's containers of a pod's container (by
// pod UID and container name under each label set, each once), newest
// first.
func (a *API) containerIDs(ctx context.Context, uid, container string) ([]*runtimeapi.Container, error) {
	var out []*runtimeapi.Container
	seen := map[string]bool{}
	for _, l := range a.labelSets() {
		cs, err := a.c.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{
			l.PodUID: uid, l.ContainerName: container}})
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if !seen[c.Id] { // speclet's own carry both sets
				seen[c.Id] = true
				out = append(out, c)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt > out[j].CreatedAt })
	return out, nil
}

// readySandboxes returns the pod's ready sandboxes (by pod UID under each
// label set, each once), newest first.
func (a *API) readySandboxes(ctx context.Context, uid string) ([]*runtimeapi.PodSandbox, error) {
	var out []*runtimeapi.PodSandbox
	seen := map[string]bool{}
	for _, l := range a.labelSets() {
		sbs, err := a.c.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
			State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
			LabelSelector: map[string]string{l.PodUID: uid}})
		if err != nil {
			return nil, err
		}
		for _, sb := range sbs {
			if !seen[sb.Id] {
				seen[sb.Id] = true
				out = append(out, sb)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt > out[j].CreatedAt })
	return out, nil
}
