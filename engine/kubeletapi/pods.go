// /pods and /runningpods/: the pods this node runs.

package kubeletapi

import (
	"net/http"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (a *API) pods(w http.ResponseWriter, r *http.Request) {
	list := v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: []v1.Pod{}}
	for _, p := range a.c.Host.Pods() {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, &list)
}

// runningPods lists the pods the runtime runs, as kubelet's /runningpods/:
// from the runtime's ready sandboxes and running containers, with names,
// namespaces and UIDs from their labels.
func (a *API) runningPods(w http.ResponseWriter, r *http.Request) {
	sbs, err := a.c.Runtime.ListPodSandbox(r.Context(), &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		httpError(w, http.StatusInternalServerError, "list sandboxes: %v", err)
		return
	}
	cs, err := a.c.Runtime.ListContainers(r.Context(), &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		httpError(w, http.StatusInternalServerError, "list containers: %v", err)
		return
	}
	byUID := map[string]*v1.Pod{}
	var order []string
	for _, sb := range sbs {
		uid := a.podUID(sb.Labels)
		if uid == "" || byUID[uid] != nil {
			continue
		}
		byUID[uid] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: a.podName(sb.Labels), Namespace: a.podNamespace(sb.Labels), UID: types.UID(uid)}}
		order = append(order, uid)
	}
	for _, c := range cs {
		p := byUID[a.podUID(c.Labels)]
		if p == nil {
			continue
		}
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: a.containerName(c.Labels), Image: c.GetImage().GetImage()})
	}
	sort.Strings(order)
	list := v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: []v1.Pod{}}
	for _, uid := range order {
		list.Items = append(list.Items, *byUID[uid])
	}
	writeJSON(w, &list)
}
