package sim

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A sandbox is READY from RunPodSandbox until StopPodSandbox, then NOTREADY
// until RemovePodSandbox:
//
//	RunPodSandbox -> READY --StopPodSandbox--> NOTREADY --RemovePodSandbox--> (gone)
//
// Stopping a sandbox kills its running containers; removing it removes them.
type sandbox struct {
	id          string
	name        string // reserved name: name_namespace_uid_attempt
	meta        *runtimeapi.PodSandboxMetadata
	state       runtimeapi.PodSandboxState
	createdAt   int64
	labels      map[string]string
	annotations map[string]string
	handler     string
	nsOptions   *runtimeapi.NamespaceOption
	ip          string
	containers  []*container // in creation order
}

func (s *sandbox) status() *runtimeapi.PodSandboxStatus {
	st := &runtimeapi.PodSandboxStatus{
		Id:             s.id,
		Metadata:       s.meta,
		State:          s.state,
		CreatedAt:      s.createdAt,
		Network:        &runtimeapi.PodSandboxNetworkStatus{Ip: s.ip},
		Labels:         s.labels,
		Annotations:    s.annotations,
		RuntimeHandler: s.handler,
	}
	if s.nsOptions != nil {
		st.Linux = &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: s.nsOptions}}
	}
	return st
}

func (s *sandbox) containerStatuses() []*runtimeapi.ContainerStatus {
	out := make([]*runtimeapi.ContainerStatus, 0, len(s.containers))
	for _, c := range s.containers {
		out = append(out, c.status())
	}
	return out
}

// RunPodSandbox creates a READY sandbox. Its name (name, namespace, uid,
// attempt) is reserved until it is removed.
func (r *Runtime) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := req.GetConfig()
	m := cfg.GetMetadata()
	if m == nil || m.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "sandbox config must include metadata with a name")
	}
	name := fmt.Sprintf("%s_%s_%s_%d", m.Name, m.Namespace, m.Uid, m.Attempt)
	r.lock()
	defer r.mu.Unlock()
	if other, ok := r.names[name]; ok {
		return nil, errorf("failed to reserve sandbox name %q: name %q is reserved for %q", name, name, other)
	}
	s := &sandbox{
		id:          newID(),
		name:        name,
		meta:        m,
		state:       runtimeapi.PodSandboxState_SANDBOX_READY,
		createdAt:   r.now(),
		labels:      cfg.GetLabels(),
		annotations: cfg.GetAnnotations(),
		handler:     req.GetRuntimeHandler(),
		nsOptions:   cfg.GetLinux().GetSecurityContext().GetNamespaceOptions(),
	}
	if s.nsOptions.GetNetwork() != runtimeapi.NamespaceMode_NODE {
		r.nextIP++
		s.ip = fmt.Sprintf("10.88.%d.%d", (r.nextIP>>8)&0xff, r.nextIP&0xff)
	}
	r.sandboxes[s.id] = s
	r.names[name] = s.id
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: s.id}, nil
}

// StopPodSandbox kills the sandbox's running containers and makes it
// NOTREADY. Stopping a stopped sandbox succeeds.
func (r *Runtime) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	r.lock()
	defer r.mu.Unlock()
	s, err := r.findSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	for _, c := range s.containers {
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			r.exit(c, 137)
		}
	}
	s.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox kills and removes the sandbox's containers and the
// sandbox. Removing an unknown sandbox succeeds, as in containerd.
func (r *Runtime) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	r.lock()
	defer r.mu.Unlock()
	s, err := r.findSandbox(req.GetPodSandboxId())
	if err != nil {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	for len(s.containers) > 0 {
		r.removeContainer(s.containers[len(s.containers)-1])
	}
	s.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	delete(r.sandboxes, s.id)
	delete(r.names, s.name)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// PodSandboxStatus returns the sandbox's status and, as for evented PLEG,
// the statuses of its containers.
func (r *Runtime) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.lock()
	defer r.mu.Unlock()
	s, err := r.findSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxStatusResponse{
		Status:             s.status(),
		ContainersStatuses: s.containerStatuses(),
		Timestamp:          r.now(),
	}, nil
}

// ListPodSandbox lists sandboxes by id (or unique prefix), state and labels.
func (r *Runtime) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := req.GetFilter()
	r.lock()
	defer r.mu.Unlock()
	var items []*runtimeapi.PodSandbox
	add := func(s *sandbox) {
		if f.GetState() != nil && f.GetState().GetState() != s.state {
			return
		}
		if !matchLabels(f.GetLabelSelector(), s.labels) {
			return
		}
		items = append(items, &runtimeapi.PodSandbox{
			Id: s.id, Metadata: s.meta, State: s.state, CreatedAt: s.createdAt,
			Labels: s.labels, Annotations: s.annotations, RuntimeHandler: s.handler,
		})
	}
	if id := f.GetId(); id != "" {
		if s, err := r.findSandbox(id); err == nil {
			add(s)
		}
	} else {
		items = make([]*runtimeapi.PodSandbox, 0, len(r.sandboxes))
		for _, s := range r.sandboxes {
			add(s)
		}
	}
	return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
}
