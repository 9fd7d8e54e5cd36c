package sim

import (
	"container/heap"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// A container moves CREATED -> RUNNING -> EXITED, each step once:
//
//	CreateContainer -> CREATED --StartContainer--> RUNNING --exit/stop/kill--> EXITED
//	CREATED --StartContainer fails--> EXITED (128, "StartError")
//
// RemoveContainer kills a running container first and then forgets it.
type container struct {
	id          string
	name        string // reserved name
	sandbox     *sandbox
	meta        *runtimeapi.ContainerMetadata
	image       *runtimeapi.ImageSpec
	imageID     string
	labels      map[string]string
	annotations map[string]string
	logPath     string
	b           *Behavior
	// pidMode is the container's PID namespace option: POD (the proto's
	// zero value, as containerd reads an absent option) joins the
	// sandbox's PID namespace, whose init is the pause process.
	pidMode runtimeapi.NamespaceMode
	// user is what ContainerStatus reports of the process's user (nil:
	// the runtime reports no users).
	user *runtimeapi.ContainerUser

	state      runtimeapi.ContainerState
	createdAt  int64
	startedAt  int64
	finishedAt int64
	exitCode   int32
	reason     string
	message    string
	timer      clock.Timer   // scripted exit
	exitDue    int64         // when the scripted exit is due (Unix ns); 0 = none
	exited     chan struct{} // closed when the container leaves RUNNING for EXITED
}

func (c *container) status() *runtimeapi.ContainerStatus {
	return &runtimeapi.ContainerStatus{
		Id:          c.id,
		Metadata:    c.meta,
		State:       c.state,
		CreatedAt:   c.createdAt,
		StartedAt:   c.startedAt,
		FinishedAt:  c.finishedAt,
		ExitCode:    c.exitCode,
		Image:       c.image,
		ImageRef:    c.imageID,
		ImageId:     c.imageID,
		Reason:      c.reason,
		Message:     c.message,
		Labels:      c.labels,
		Annotations: c.annotations,
		LogPath:     c.logPath,
		User:        c.user,
	}
}

// userOf is the user a container created from sc runs as, as containerd
// 2.x reports it: its uid and gid (0 unless set) and its groups, the gid
// first (the sim's images name no groups, so Merge and Strict agree).
func userOf(sc *runtimeapi.LinuxContainerSecurityContext) *runtimeapi.ContainerUser {
	gid := sc.GetRunAsGroup().GetValue()
	groups := []int64{gid}
	for _, g := range sc.GetSupplementalGroups() {
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	return &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: sc.GetRunAsUser().GetValue(), Gid: gid, SupplementalGroups: groups}}
}

// exit moves a running container to EXITED with code now. r.mu is held.
func (r *Runtime) exit(c *container, code int32) { r.exitAt(c, code, r.now()) }

// exitAt moves a running container to EXITED with code at time at (Unix
// nanoseconds). r.mu is held.
func (r *Runtime) exitAt(c *container, code int32, at int64) {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.exitDue = 0
	c.state = runtimeapi.ContainerState_CONTAINER_EXITED
	c.finishedAt = at
	c.exitCode = code
	c.reason = "Completed"
	if code != 0 {
		c.reason = "Error"
	}
	close(c.exited)
	r.emit(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
}

// removeContainer kills c if it runs and forgets it. r.mu is held.
func (r *Runtime) removeContainer(c *container) {
	if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.exit(c, 137)
	}
	list := c.sandbox.containers
	for i, x := range list {
		if x == c {
			c.sandbox.containers = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	delete(r.containers, c.id)
	delete(r.names, c.name)
	r.emit(c, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
}

// CreateContainer creates a CREATED container in a READY sandbox from an
// image that is present. The container's behaviour is decided now (see
// OnContainer).
func (r *Runtime) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	cfg := req.GetConfig()
	m := cfg.GetMetadata()
	if m == nil || m.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "container config must include metadata with a name")
	}
	r.lock()
	defer r.mu.Unlock()
	s, err := r.findSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if s.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		// containerd's answer once the sandbox's task is gone (stopped or
		// its pause process killed).
		return nil, status.Errorf(codes.NotFound, "failed to get sandbox container task: no running task found: task %s not found: not found", s.id)
	}
	img := r.findImage(cfg.GetImage().GetImage())
	if img == nil {
		return nil, status.Errorf(codes.NotFound, "failed to resolve image %q: not found", cfg.GetImage().GetImage())
	}
	sm := s.meta
	name := fmt.Sprintf("%s_%s_%s_%s_%d", m.Name, sm.Name, sm.Namespace, sm.Uid, m.Attempt)
	if other, ok := r.names[name]; ok {
		return nil, errorf("failed to reserve container name %q: name %q is reserved for %q", name, name, other)
	}
	c := &container{
		id:          newID(),
		name:        name,
		sandbox:     s,
		meta:        m,
		image:       cfg.GetImage(),
		imageID:     img.id,
		labels:      cfg.GetLabels(),
		annotations: cfg.GetAnnotations(),
		b:           r.behaviorFor(sm.Name, cfg),
		pidMode:     cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(),
		state:       runtimeapi.ContainerState_CONTAINER_CREATED,
		createdAt:   r.now(),
		exited:      make(chan struct{}),
	}
	if cfg.GetLogPath() != "" {
		c.logPath = filepath.Join(req.GetSandboxConfig().GetLogDirectory(), cfg.GetLogPath())
	}
	if r.features.GetSupplementalGroupsPolicy() {
		c.user = userOf(cfg.GetLinux().GetSecurityContext())
	}
	r.containers[c.id] = c
	r.names[name] = c.id
	s.containers = append(s.containers, c)
	r.emit(c, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return &runtimeapi.CreateContainerResponse{ContainerId: c.id}, nil
}

// StartContainer starts a CREATED container in a READY sandbox.
func (r *Runtime) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	r.lock()
	defer r.mu.Unlock()
	c, err := r.findContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	r.record("StartContainer", c, 0, nil)
	if c.state != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, errorf("container %q is in %s state", c.id, c.state)
	}
	if c.sandbox.state != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, errorf("sandbox container %q is not running", c.sandbox.id)
	}
	if c.b.StartError != "" {
		c.state = runtimeapi.ContainerState_CONTAINER_EXITED
		c.finishedAt = r.now()
		c.exitCode = 128
		c.reason = "StartError"
		c.message = c.b.StartError
		close(c.exited)
		r.emit(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
		return nil, errorf("failed to create containerd task: failed to create shim task: %s", c.b.StartError)
	}
	if rule := r.rules["StartContainer"]; rule != nil && rule.late > 0 {
		rule.late--
		r.late = append(r.late, c.id)
		return nil, status.Errorf(codes.DeadlineExceeded, "sim: StartContainer %q is queued behind slower work: context deadline exceeded", c.id)
	}
	r.run(c, false)
	return &runtimeapi.StartContainerResponse{}, nil
}

// run starts c's process: RUNNING from now, with its scripted exit; quiet:
// without a ContainerStarted event. r.mu is held.
func (r *Runtime) run(c *container, quiet bool) {
	c.state = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.startedAt = r.now()
	if !quiet {
		r.emit(c, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	}
	if e := c.b.Exit; e != nil {
		if e.After <= 0 {
			r.exit(c, e.Code)
		} else {
			c.exitDue = c.startedAt + e.After.Nanoseconds()
			heap.Push(&r.due, dueExit{at: c.exitDue, c: c, code: e.Code})
			// Every call applies the exits that are due (see lock), so what
			// a client reads follows the clock at once. The timer makes an
			// exit happen, with its event, when no call comes. A fake clock
			// runs the callback inside Step with its own lock held, so the
			// callback must neither take r.mu nor touch the clock: the exit
			// is applied in a goroutine that Settle waits for.
			c.timer = r.clock.AfterFunc(e.After, func() {
				r.pending.Add(1)
				go func() {
					defer r.pending.Done()
					r.lock()
					r.mu.Unlock()
				}()
			})
		}
	}
}

// StopContainer sends the container's process SIGTERM and, timeout seconds
// later on the runtime's clock, SIGKILL; it returns once the container has
// stopped. Stopping a container that is not running succeeds.
func (r *Runtime) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	r.lock()
	c, err := r.findContainer(req.GetContainerId())
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	r.record("StopContainer", c, req.GetTimeout(), nil)
	if c.state == runtimeapi.ContainerState_CONTAINER_UNKNOWN && c.startedAt != 0 && c.finishedAt == 0 {
		c.state = runtimeapi.ContainerState_CONTAINER_RUNNING // FinishLateStarts(unknown): its process runs
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Unlock()
		return &runtimeapi.StopContainerResponse{}, nil
	}
	switch {
	case c.b.Term == TermHandled:
		r.exit(c, c.b.TermExitCode)
	case c.b.Term == TermIgnored && req.GetTimeout() > 0:
		exited := c.exited
		r.mu.Unlock()
		t := r.clock.NewTimer(time.Duration(req.GetTimeout()) * time.Second)
		defer t.Stop()
		select {
		case <-exited:
			return &runtimeapi.StopContainerResponse{}, nil
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-t.C():
		}
		r.lock()
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			r.exit(c, 137)
		}
	case c.b.Term == TermIgnored:
		r.exit(c, 137)
	default:
		r.exit(c, 143)
	}
	r.mu.Unlock()
	return &runtimeapi.StopContainerResponse{}, nil
}

// ExecSync answers with the container's scripted ExecReply (see
// Behavior.Exec) after its delay on the runtime's clock. An unknown
// container is NotFound; one that is not running fails as in containerd.
func (r *Runtime) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	r.lock()
	c, err := r.findContainer(req.GetContainerId())
	if err != nil {
		r.mu.Unlock()
		return nil, err
	}
	r.record("ExecSync", c, req.GetTimeout(), req.GetCmd())
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Unlock()
		return nil, errorf("container %q is in %s state", c.id, c.state)
	}
	reply := c.b.execReply(req.GetCmd())
	r.mu.Unlock()
	if d := reply.Delay; d > 0 {
		timedOut := false
		if to := time.Duration(req.GetTimeout()) * time.Second; to > 0 && to < d {
			d, timedOut = to, true
		}
		t := r.clock.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C():
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if timedOut {
			return nil, status.Errorf(codes.DeadlineExceeded, "timeout %ds exceeded running %q", req.GetTimeout(), req.GetCmd())
		}
	}
	return &runtimeapi.ExecSyncResponse{Stdout: []byte(reply.Stdout), Stderr: []byte(reply.Stderr), ExitCode: reply.ExitCode}, nil
}

// RemoveContainer kills the container if it runs and removes it. Removing
// an unknown container succeeds, as in containerd.
func (r *Runtime) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	r.lock()
	defer r.mu.Unlock()
	if c, err := r.findContainer(req.GetContainerId()); err == nil {
		r.removeContainer(c)
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// ContainerStatus returns the status of a container.
func (r *Runtime) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	r.lock()
	defer r.mu.Unlock()
	c, err := r.findContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatusResponse{Status: c.status()}, nil
}

// ListContainers lists containers by id (or unique prefix), state, sandbox
// and labels.
func (r *Runtime) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	f := req.GetFilter()
	r.lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.Container
	add := func(c *container) {
		if f.GetState() != nil && f.GetState().GetState() != c.state {
			return
		}
		if !matchLabels(f.GetLabelSelector(), c.labels) {
			return
		}
		out = append(out, &runtimeapi.Container{
			Id: c.id, PodSandboxId: c.sandbox.id, Metadata: c.meta, Image: c.image,
			ImageRef: c.imageID, ImageId: c.imageID, State: c.state, CreatedAt: c.createdAt,
			Labels: c.labels, Annotations: c.annotations,
		})
	}
	switch {
	case f.GetId() != "":
		if c, err := r.findContainer(f.GetId()); err == nil && (f.GetPodSandboxId() == "" || hasPrefix(c.sandbox.id, f.GetPodSandboxId())) {
			add(c)
		}
	case f.GetPodSandboxId() != "":
		if s, err := r.findSandbox(f.GetPodSandboxId()); err == nil {
			for _, c := range s.containers {
				add(c)
			}
		}
	default:
		out = make([]*runtimeapi.Container, 0, len(r.containers))
		for _, c := range r.containers {
			add(c)
		}
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

func hasPrefix(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }

// Usage is what a container uses, as ListContainerStats reports it.
type Usage struct {
	MemoryWorkingSet uint64 // bytes
	WritableLayer    uint64 // bytes of the container's writable layer
}

// SetUsage makes ListContainerStats report u for the containers of pod
// (sandbox metadata name) named name ("" = every container of the pod).
func (r *Runtime) SetUsage(pod, name string, u Usage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.usage == nil {
		r.usage = map[[2]string]Usage{}
	}
	r.usage[[2]string{pod, name}] = u
}

// ListContainerStats reports the usage SetUsage scripted (zero otherwise)
// for the running containers that match the filter; a container that is
// not running has stats without memory and with a writable layer of no
// used bytes, as containerd 1.6 reports it.
func (r *Runtime) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	r.lock()
	defer r.mu.Unlock()
	f := req.GetFilter()
	var out []*runtimeapi.ContainerStats
	for _, c := range r.containers {
		if f.GetId() != "" && f.GetId() != c.id || f.GetPodSandboxId() != "" && f.GetPodSandboxId() != c.sandbox.id {
			continue
		}
		match := true
		for k, v := range f.GetLabelSelector() {
			match = match && c.labels[k] == v
		}
		if !match {
			continue
		}
		attrs := &runtimeapi.ContainerAttributes{Id: c.id, Metadata: c.meta, Labels: c.labels, Annotations: c.annotations}
		if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
			out = append(out, &runtimeapi.ContainerStats{Attributes: attrs, WritableLayer: &runtimeapi.FilesystemUsage{
				FsId:      &runtimeapi.FilesystemIdentifier{Mountpoint: ImageFsMountpoint},
				UsedBytes: &runtimeapi.UInt64Value{}, InodesUsed: &runtimeapi.UInt64Value{}}})
			continue
		}
		u, ok := r.usage[[2]string{c.sandbox.meta.GetName(), c.meta.GetName()}]
		if !ok {
			u = r.usage[[2]string{c.sandbox.meta.GetName(), ""}]
		}
		now := r.now()
		out = append(out, &runtimeapi.ContainerStats{
			Attributes: attrs,
			Memory:     &runtimeapi.MemoryUsage{Timestamp: now, WorkingSetBytes: &runtimeapi.UInt64Value{Value: u.MemoryWorkingSet}},
			WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: now, FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: ImageFsMountpoint},
				UsedBytes: &runtimeapi.UInt64Value{Value: u.WritableLayer}},
		})
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: out}, nil
}
