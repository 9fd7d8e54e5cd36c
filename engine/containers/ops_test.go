package containers

import (
	"errors"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/op/optest"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/fsm"
)

// reply is one operation an action asks for (its name, and what it is
// about) and the result the test feeds it.
type reply struct {
	Op, About string
	V         any
	Err       error
}

// ctrOps are the actions of a Container that call the runtime, by spec
// name.
var ctrOps = map[string]optest.Action[*Container]{
	fsm.ContainerActionCreateContainer.String():    {CRI: fsm.ContainerActionCRI[fsm.ContainerActionCreateContainer], First: (*Container).CreateContainer},
	fsm.ContainerActionStartContainer.String():     {CRI: fsm.ContainerActionCRI[fsm.ContainerActionStartContainer], First: (*Container).StartContainer},
	fsm.ContainerActionStopContainer.String():      {CRI: fsm.ContainerActionCRI[fsm.ContainerActionStopContainer], First: (*Container).StopContainer},
	fsm.ContainerActionForceStopContainer.String(): {CRI: fsm.ContainerActionCRI[fsm.ContainerActionForceStopContainer], First: (*Container).ForceStopContainer},
	fsm.ContainerActionRecordExit.String():         {CRI: fsm.ContainerActionCRI[fsm.ContainerActionRecordExit], First: (*Container).RecordExit},
	fsm.ContainerActionRemoveContainer.String():    {CRI: fsm.ContainerActionCRI[fsm.ContainerActionRemoveContainer], First: (*Container).RemoveContainer},
}

// errNotFound is the runtime's reply about an object it does not know.
var errNotFound = &cri.Error{Op: "StopContainer", Class: cri.ClassNotFound, Err: errors.New("not found")}

// ctrWant is where a container stands once its action is done.
type ctrWant struct {
	raised       []fsm.ContainerEvent
	id           string
	ids          []string
	restartCount int32
	waiting      string // waitingReason
	image        string // imageRef
	exit         string // the current instance's exit: code, reason, message
	user         string // the current instance's user as reported
	failed       bool   // the action returned an error
}

func (w ctrWant) String() string {
	return fmt.Sprintf("raised %v, id %q, ids %q, restarts %d, waiting %q, image %q, exit %q, user %q, failed %v",
		w.raised, w.id, w.ids, w.restartCount, w.waiting, w.image, w.exit, w.user, w.failed)
}

var (
	ctrConfig = &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Annotations: map[string]string{runtimepods.AnnotationContainerHash: "h1"}}
	configs = createConfigs{ctrConfig, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web"}}}
	logged  = createConfigs{&runtimeapi.ContainerConfig{Metadata: ctrConfig.Metadata, Annotations: ctrConfig.Annotations, LogPath: "app/0.log"},
		&runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web"}, LogDirectory: "/var/log/pods/default_web_u"}}
	exited = func(code int32, msg string, mounts bool) *runtimeapi.ContainerStatus {
		st := &runtimeapi.ContainerStatus{Id: "c-1", State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: code, Reason: "Error", Message: msg}
		if mounts {
			st.Mounts = []*runtimeapi.Mount{{ContainerPath: "/dev/termination-log", HostPath: "/x"}}
		}
		return st
	}
	preStop  = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
	postFail = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
)

// TestContainerActionsAsOperations drives the container machine's actions
// through the operations they return, fed the runtime's replies by hand:
// create, start, stop, record_exit and remove_container decide without a
// runtime.
func TestContainerActionsAsOperations(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		name    string
		action  string                           // the spec name of an action of ctrOps
		setup   func(c *Container, o *fakeOwner) // the container before the action
		replies []reply
		want    ctrWant
	}{
		{name: "create: the first instance", action: "create_container",
			replies: []reply{{"RequestInputs", "app", nil, nil}, {"ContainerConfig", "app", configs, nil}, {"CreateContainer", " app", "c-1", nil}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventCreated}, id: "c-1", ids: []string{"c-1"}}},
		{name: "create: a restart counts", action: "create_container",
			setup: func(c *Container, o *fakeOwner) {
				o.sandboxID = "sb-1"
				c.id, c.ids, c.restartCount = "c-0", []string{"c-0"}, 2
			},
			replies: []reply{{"RequestInputs", "app", nil, nil}, {"ContainerConfig", "app", configs, nil}, {"CreateContainer", "sb-1 app", "c-1", nil}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventCreated}, id: "c-1", ids: []string{"c-0", "c-1"}, restartCount: 3}},
		{name: "create: runAsNonRoot without a user reads the image's", action: "create_container",
			setup: func(c *Container, o *fakeOwner) { o.spec.SecurityContext = &v1.SecurityContext{RunAsNonRoot: &yes} },
			replies: []reply{{"RequestInputs", "app", nil, nil}, {"ImageStatus", "busybox:latest", &runtimeapi.Image{Id: "sha256:1"}, nil},
				{"ContainerConfig", "app", configs, nil}, {"CreateContainer", " app", "c-1", nil}},
			want: ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventCreated}, id: "c-1", ids: []string{"c-1"}}},
		{name: "create: the image's user cannot be read", action: "create_container",
			setup:   func(c *Container, o *fakeOwner) { o.spec.SecurityContext = &v1.SecurityContext{RunAsNonRoot: &yes} },
			replies: []reply{{"RequestInputs", "app", nil, nil}, {"ImageStatus", "busybox:latest", nil, errors.New("unavailable")}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventCreateFailed}, waiting: ReasonCreateContainerConfig, failed: true}},
		{name: "create: services not read yet", action: "create_container",
			replies: []reply{{"RequestInputs", "app", nil, errors.New("services not synced")}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventCreateFailed}, waiting: ReasonCreateContainerConfig, failed: true}},
		{name: "create: the config cannot be built", action: "create_container",
			replies: []reply{{"RequestInputs", "app", nil, nil}, {"ContainerConfig", "app", nil, errors.New(`configmap "cm" not found`)}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventCreateFailed}, waiting: ReasonCreateContainerConfig, failed: true}},
		{name: "create: CreateContainer fails", action: "create_container",
			replies: []reply{{"RequestInputs", "app", nil, nil}, {"ContainerConfig", "app", configs, nil}, {"CreateContainer", " app", nil, errors.New("no space")}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventCreateFailed}, waiting: ReasonCreateContainer, failed: true}},
		{name: "create: the container's log directory first", action: "create_container",
			replies: []reply{{"RequestInputs", "app", nil, nil}, {"ContainerConfig", "app", logged, nil},
				{"MakeContainerLogDirectory", "/var/log/pods/default_web_u/app", nil, nil}, {"CreateContainer", " app", "c-1", nil}},
			want: ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventCreated}, id: "c-1", ids: []string{"c-1"}}},
		{name: "create: the log directory cannot be made", action: "create_container",
			replies: []reply{{"RequestInputs", "app", nil, nil}, {"ContainerConfig", "app", logged, nil},
				{"MakeContainerLogDirectory", "/var/log/pods/default_web_u/app", nil, errors.New("mkdir /var/log/pods: read-only file system")}},
			want: ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventCreateFailed}, waiting: ReasonCreateContainerConfig, failed: true}},
		{name: "start: the log linked after the start", action: "start_container",
			setup: func(c *Container, o *fakeOwner) {
				withInstance(c, o)
				o.linksDir, c.logFile = "/var/log/containers", "/var/log/pods/default_web_u/app/0.log"
			},
			replies: []reply{{"StartContainer", "c-1", nil, nil}, {"MakeLogLink", "/var/log/containers/web_default_app-c-1.log", nil, nil}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventStarted}, id: "c-1", ids: []string{"c-1"}}},
		{name: "start: a link that cannot be made leaves the container started", action: "start_container",
			setup: func(c *Container, o *fakeOwner) {
				withInstance(c, o)
				o.linksDir, c.logFile = "/var/log/containers", "/var/log/pods/default_web_u/app/0.log"
			},
			replies: []reply{{"StartContainer", "c-1", nil, nil}, {"MakeLogLink", "/var/log/containers/web_default_app-c-1.log", nil, errors.New("permission denied")}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventStarted}, id: "c-1", ids: []string{"c-1"}}},
		{name: "start: started", action: "start_container", setup: withInstance,
			replies: []reply{{"StartContainer", "c-1", nil, nil}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventStarted}, id: "c-1", ids: []string{"c-1"}}},
		{name: "start: the user read where the runtime reports users", action: "start_container",
			setup: func(c *Container, o *fakeOwner) { withInstance(c, o); o.reportsUser = true },
			replies: []reply{{"StartContainer", "c-1", nil, nil}, {"ContainerStatus", "c-1", &runtimeapi.ContainerStatus{Id: "c-1",
				User: &runtimeapi.ContainerUser{Linux: &runtimeapi.LinuxContainerUser{Uid: 1000, Gid: 3000, SupplementalGroups: []int64{3000, 4000}}}}, nil}},
			want: ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventStarted}, id: "c-1", ids: []string{"c-1"}, user: "1000 3000 [3000 4000]"}},
		{name: "start: a user that cannot be read leaves the container started", action: "start_container",
			setup:   func(c *Container, o *fakeOwner) { withInstance(c, o); o.reportsUser = true },
			replies: []reply{{"StartContainer", "c-1", nil, nil}, {"ContainerStatus", "c-1", nil, errors.New("unavailable")}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventStarted}, id: "c-1", ids: []string{"c-1"}}},
		{name: "start: StartContainer fails", action: "start_container", setup: withInstance,
			replies: []reply{{"StartContainer", "c-1", nil, errors.New("exec format error")}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventStartFailed}, id: "c-1", ids: []string{"c-1"}, waiting: ReasonRunContainer, failed: true}},
		{name: "start: the postStart hook fails", action: "start_container",
			setup:   func(c *Container, o *fakeOwner) { withInstance(c, o); o.spec.Lifecycle = postFail },
			replies: []reply{{"StartContainer", "c-1", nil, nil}, {"PostStartHook", "app", nil, errors.New("exit 1")}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventPostStartFailed}, id: "c-1", ids: []string{"c-1"}, waiting: ReasonPostStartHookError, failed: true}},
		{name: "stop: no instance, no call", action: "stop_container",
			want: ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventStopped}}},
		{name: "stop: the preStop hook first, then the grace it left", action: "stop_container",
			setup:   func(c *Container, o *fakeOwner) { withInstance(c, o); o.spec.Lifecycle = preStop },
			replies: []reply{{"PreStopHook", "app", int64(1), nil}, {"StopContainer", "c-1 1s", nil, nil}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventStopped}, id: "c-1", ids: []string{"c-1"}}},
		{name: "stop: the preStop hook runs once per instance", action: "stop_container",
			setup: func(c *Container, o *fakeOwner) {
				withInstance(c, o)
				o.spec.Lifecycle = preStop
				c.preStopDone = "c-1"
			},
			replies: []reply{{"StopContainer", "c-1 1s", nil, nil}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventStopped}, id: "c-1", ids: []string{"c-1"}}},
		{name: "stop: gone counts as stopped", action: "stop_container", setup: withInstance,
			replies: []reply{{"StopContainer", "c-1 1s", nil, errNotFound}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventStopped}, id: "c-1", ids: []string{"c-1"}}},
		{name: "stop: a failure raises nothing", action: "stop_container", setup: withInstance,
			replies: []reply{{"StopContainer", "c-1 1s", nil, errors.New("deadline exceeded")}},
			want:    ctrWant{id: "c-1", ids: []string{"c-1"}, failed: true}},
		{name: "force_stop: no grace", action: "force_stop_container", setup: withInstance,
			replies: []reply{{"StopContainer", "c-1 0s", nil, nil}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventStopped}, id: "c-1", ids: []string{"c-1"}}},
		{name: "record_exit: the event's status, with the message file", action: "record_exit",
			setup:   func(c *Container, o *fakeOwner) { withInstance(c, o); c.exitStatus = exited(2, "bad", true) },
			replies: []reply{{"TerminationMessage", "c-1", "disk full", nil}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventExitRecorded}, id: "c-1", ids: []string{"c-1"}, exit: "2 Error bad: disk full"}},
		{name: "record_exit: a status without mounts is read again", action: "record_exit",
			setup: func(c *Container, o *fakeOwner) {
				withInstance(c, o)
				c.exitStatus, o.spec.TerminationMessagePath = exited(2, "", false), "/dev/termination-log"
			},
			replies: []reply{{"ContainerStatus", "c-1", exited(2, "", true), nil}, {"TerminationMessage", "c-1", "disk full", nil}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventExitRecorded}, id: "c-1", ids: []string{"c-1"}, exit: "2 Error disk full"}},
		{name: "record_exit: read from the runtime", action: "record_exit", setup: withInstance,
			replies: []reply{{"ContainerStatus", "c-1", exited(1, "", true), nil}, {"TerminationMessage", "c-1", "", nil}},
			want:    ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventExitRecorded}, id: "c-1", ids: []string{"c-1"}, exit: "1 Error "}},
		{name: "record_exit: gone from the runtime", action: "record_exit", setup: withInstance,
			replies: []reply{{"ContainerStatus", "c-1", nil, errNotFound}},
			want: ctrWant{raised: []fsm.ContainerEvent{fsm.ContainerEventExitRecorded}, id: "c-1", ids: []string{"c-1"},
				exit: "137 ContainerStatusUnknown The container could not be located when the pod was terminated", failed: true}},
		{name: "remove_container: the dead beyond the newest, oldest first", action: "remove_container",
			setup:   func(c *Container, o *fakeOwner) { c.id, c.ids = "c-2", []string{"c-0", "c-1", "c-2"} },
			replies: []reply{{"RemoveContainer", "c-0", nil, nil}, {"RemoveContainer", "c-1", nil, errNotFound}},
			want:    ctrWant{id: "c-2", ids: []string{"c-2"}}},
		{name: "remove_container: each removed instance's log link goes with it", action: "remove_container",
			setup: func(c *Container, o *fakeOwner) {
				o.linksDir, c.id, c.ids = "/var/log/containers", "c-2", []string{"c-0", "c-1", "c-2"}
			},
			replies: []reply{{"RemoveContainer", "c-0", nil, nil}, {"RemoveLogLink", "/var/log/containers/web_default_app-c-0.log", nil, nil},
				{"RemoveContainer", "c-1", nil, errors.New("busy")}},
			want: ctrWant{id: "c-2", ids: []string{"c-1", "c-2"}, failed: true}},
		{name: "remove_container: a failed removal keeps the instance", action: "remove_container",
			setup:   func(c *Container, o *fakeOwner) { c.id, c.ids = "c-2", []string{"c-0", "c-1", "c-2"} },
			replies: []reply{{"RemoveContainer", "c-0", nil, errors.New("busy")}, {"RemoveContainer", "c-1", nil, nil}},
			want:    ctrWant{id: "c-2", ids: []string{"c-0", "c-2"}, failed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newFakeOwner()
			c := o.container()
			if tc.setup != nil {
				tc.setup(c, o)
			}
			op := optest.RunReplies(t, ctrOps, tc.action, c, tc.replies)
			got := ctrWant{raised: o.raised, id: c.id, ids: c.ids, restartCount: c.restartCount,
				waiting: c.waitingReason, image: c.imageRef, failed: op.Err() != nil}
			if t := c.current; t != nil {
				got.exit = fmt.Sprintf("%d %s %s", t.ExitCode, t.Reason, t.Message)
			}
			if u := c.User().GetLinux(); u != nil {
				got.user = fmt.Sprintf("%d %d %v", u.Uid, u.Gid, u.SupplementalGroups)
			}
			if got.String() != tc.want.String() {
				t.Errorf("container: %v\nwant:      %v", got, tc.want)
			}
		})
	}
}

// withInstance gives c a created instance c-1.
func withInstance(c *Container, _ *fakeOwner) { c.id, c.ids = "c-1", []string{"c-1"} }
