package containers

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/containerlogs"
	"github.com/speclet/speclet/engine/handlers"
	"github.com/speclet/speclet/engine/op"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/runtimepods"
	"github.com/speclet/speclet/fsm"
)

// The container machine's actions but the image's (engine/images), as
// operations.

// CountRestart advances the CrashLoopBackOff. The restarting choice skips
// it after a probe kill of a container's first instance (FirstProbeKill).
func (c *Container) CountRestart() op.Op {
	c.o.CountCrash()
	return op.Done(nil)
}

// CreateContainer creates the next instance in the current sandbox; raises
// created or create_failed. The first instance of a run counts on from the
// log files earlier instances left (RestartCountFromLogs). It reads the pod's inputs
// (Owner.RequestInputs), the image's user where a runAsNonRoot check needs
// it, builds the config of the next instance and creates it.
func (c *Container) CreateContainer() op.Op {
	rc := c.restartCount
	first := c.id == ""
	if !first {
		rc++ // an instance existed before: this one is a restart
	}
	return op.Host("RequestInputs", c.o.Name(), c.o.RequestInputs, func(inputs func(*podspec.ContainerRequest), err error) op.Op {
		if err != nil {
			return c.configFailed(err)
		}
		return c.imageUser(func(user podspec.ImageUser, err error) op.Op {
			if err != nil {
				return c.configFailed(err)
			}
			return op.Host("ContainerConfig", c.o.Name(), func(context.Context) (createConfigs, error) {
				sb := c.o.SandboxConfig()
				if dir := sb.GetLogDirectory(); first && dir != "" {
					// No instance of this run: count on from the log
					// files of earlier ones (a static pod re-added with
					// its UID), as kubelet does.
					rc = podspec.RestartCountFromLogs(podspec.ContainerLogDir(dir, c.o.Name()))
				}
				cfg, err := c.o.BuildConfig(rc, inputs, user)
				return createConfigs{cfg, sb}, err
			}, func(cs createConfigs, err error) op.Op {
				if err != nil {
					return c.configFailed(err)
				}
				return c.makeLogDir(cs, func() op.Op {
					return op.CreateContainer(c.o.SandboxID(), cs.container, cs.sandbox, func(id string, err error) op.Op {
						return c.madeInstance(rc, cs, id, err)
					})
				})
			})
		})
	})
}

// createConfigs are the configs CreateContainer takes: the instance's and
// its sandbox's.
type createConfigs struct {
	container *runtimeapi.ContainerConfig
	sandbox   *runtimeapi.PodSandboxConfig
}

// logFile is the log file of an instance created from cs: the sandbox's
// LogDirectory joined with the container's LogPath; "" without either.
func (cs createConfigs) logFile() string {
	dir, path := cs.sandbox.GetLogDirectory(), cs.container.GetLogPath()
	if dir == "" || path == "" {
		return ""
	}
	return filepath.Join(dir, path)
}

// makeLogDir makes the directory of the log file of the instance cs
// creates (kubelet's BuildContainerLogsDirectory before CreateContainer),
// also when the pod's log directory was removed while the pod runs, then
// goes on with then. A directory that cannot be made is a
// CreateContainerConfigError naming it.
func (c *Container) makeLogDir(cs createConfigs, then func() op.Op) op.Op {
	file := cs.logFile()
	if file == "" {
		return then()
	}
	dir := filepath.Dir(file)
	return op.Do("MakeContainerLogDirectory", dir, func(context.Context) error { return podspec.EnsureDir(dir, 0o755) }, func(err error) op.Op {
		if err != nil {
			return c.configFailed(fmt.Errorf("create container log directory: %w", err))
		}
		return then()
	})
}

// configFailed is kubelet's CreateContainerConfigError (a config that
// cannot be built), with its message where it has one.
func (c *Container) configFailed(err error) op.Op {
	msg := err.Error()
	if cerr := (*podspec.ConfigError)(nil); errors.As(err, &cerr) {
		msg = cerr.Message()
	}
	c.o.CountStart(err)
	c.waitingReason, c.waitingMessage = ReasonCreateContainerConfig, msg
	c.o.Logger().Warn("CreateContainerConfigError", "pod", c.o.Key(), "container", c.o.Name(), "err", err)
	c.o.Event(v1.EventTypeWarning, "Failed", "Error: %s", msg)
	c.o.Raise(fsm.ContainerEventCreateFailed)
	return op.Done(fmt.Errorf("create container %q: %w", c.o.Name(), err))
}

// madeInstance reads CreateContainer's reply for instance restartCount made
// from cs.
func (c *Container) madeInstance(restartCount int32, cs createConfigs, id string, err error) op.Op {
	cfg := cs.container
	if err == nil {
		c.id, c.ids, c.restartCount, c.logFile = id, append(c.ids, id), restartCount, cs.logFile()
		c.setCreated(id, c.o.Clock().Now())
		c.runHash = cfg.Annotations[runtimepods.AnnotationContainerHash]
		c.exitStatus, c.user = nil, nil
		c.o.Event(v1.EventTypeNormal, "Created", "Created container: %s", c.o.Name())
		c.o.Raise(fsm.ContainerEventCreated)
		return op.Done(nil)
	}
	err = fmt.Errorf("create container %q: %w", c.o.Name(), err)
	c.o.CountStart(err)
	c.waitingReason, c.waitingMessage = ReasonCreateContainer, err.Error()
	c.o.Event(v1.EventTypeWarning, "Failed", "Error: %v", err)
	c.o.Raise(fsm.ContainerEventCreateFailed)
	return op.Done(err)
}

// imageUser hands then the image's user when the container must run as
// non-root and names no user (kubelet's getImageUser), so that podspec can
// check it; else the zero ImageUser.
func (c *Container) imageUser(then func(podspec.ImageUser, error) op.Op) op.Op {
	if !podspec.NeedsImageUser(c.o.Pod(), c.o.Spec()) {
		return then(podspec.ImageUser{}, nil)
	}
	image := c.imageRef
	if image == "" {
		image = c.o.Spec().Image
	}
	return op.ImageStatus(&runtimeapi.ImageSpec{Image: image}, func(img *runtimeapi.Image, err error) op.Op {
		if err != nil {
			return then(podspec.ImageUser{}, fmt.Errorf("create container %q: image status %q: %w", c.o.Name(), image, err))
		}
		return then(podspec.ImageUserOf(img), nil)
	})
}

// StartContainer starts the created instance, reads the user it runs as
// where the runtime reports it, links its log file where log shippers
// look, then runs its postStart hook; raises started, start_failed or
// post_start_failed.
func (c *Container) StartContainer() op.Op {
	return op.StartContainer(c.id, func(err error) op.Op {
		c.o.CountStart(err)
		if err != nil {
			c.waitingReason, c.waitingMessage = ReasonRunContainer, err.Error()
			c.o.Event(v1.EventTypeWarning, "Failed", "Error: %v", err)
			c.o.Raise(fsm.ContainerEventStartFailed)
			return op.Done(fmt.Errorf("start container %q: %w", c.o.Name(), err))
		}
		c.startedAt = c.o.Clock().Now()
		c.o.Event(v1.EventTypeNormal, "Started", "Started container %s", c.o.Name())
		return c.readUser(func() op.Op { return c.linkLog(c.postStart) })
	})
}

// readUser reads the started instance's user from its ContainerStatus
// when the runtime reports users (Owner.ReportsUser), for the status
// (kubelet's status.containerStatuses[].user, from every ContainerStatus
// it reads), then goes on with then. A failure is logged: the container
// runs, its status shows no user.
func (c *Container) readUser(then func() op.Op) op.Op {
	if !c.o.ReportsUser() {
		return then()
	}
	id := c.id
	return op.ContainerStatus(id, func(st *runtimeapi.ContainerStatus, err error) op.Op {
		if err != nil {
			c.o.Logger().Warn("Failed to read the container's user", "pod", c.o.Key(), "container", c.o.Name(), "err", err)
			return then()
		}
		if c.id == id {
			c.user = st.GetUser()
		}
		return then()
	})
}

// linkLog links the started instance's log file where log shippers look
// (kubelet's legacy log symlink after StartContainer), then goes on with
// then. A link that cannot be made is logged: the container runs.
func (c *Container) linkLog(then func() op.Op) op.Op {
	link, file := c.o.LogLink(c.id), c.logFile
	if link == "" || file == "" {
		return then()
	}
	return op.Do("MakeLogLink", link, func(context.Context) error {
		_, err := containerlogs.Link(link, file)
		return err
	}, func(err error) op.Op {
		if err != nil {
			c.o.Logger().Warn("Failed to create log link", "pod", c.o.Key(), "container", c.o.Name(), "link", link, "log", file, "err", err)
		}
		return then()
	})
}

// postStart runs the started instance's postStart hook, if any; raises
// started or post_start_failed.
func (c *Container) postStart() op.Op {
	h := c.postStartHook()
	if h == nil {
		c.o.Raise(fsm.ContainerEventStarted)
		return op.Done(nil)
	}
	target := c.HookTarget()
	return op.Do("PostStartHook", c.o.Name(), func(ctx context.Context) error { return target.Hook(ctx, "PostStart", h, 0) }, func(err error) op.Op {
		if err != nil {
			// kubelet: FailedPostStartHook; the machine stops the
			// container and the restart policy decides
			// (PostStartHookError).
			c.o.Logger().Warn("FailedPostStartHook", "pod", c.o.Key(), "container", c.o.Name(), "err", err)
			c.o.Event(v1.EventTypeWarning, "FailedPostStartHook", "PostStartHook failed: %v", err)
			c.waitingReason, c.waitingMessage = ReasonPostStartHookError, err.Error()
			c.o.Raise(fsm.ContainerEventPostStartFailed)
			return op.Done(fmt.Errorf("start container %q: %w", c.o.Name(), err))
		}
		c.o.Raise(fsm.ContainerEventStarted)
		return op.Done(nil)
	})
}

// StopContainer runs the preStop hook of the current instance (once), then
// stops it with the grace period that is left; raises stopped.
func (c *Container) StopContainer() op.Op {
	grace := c.stopGrace()
	h := c.preStopHook()
	if c.id == "" || h == nil || c.preStopDone == c.id || grace <= 0 {
		return c.stop(grace)
	}
	c.preStopDone = c.id
	target := c.HookTarget()
	return op.Host("PreStopHook", c.o.Name(), func(ctx context.Context) (int64, error) {
		return c.runPreStop(ctx, target, h, grace), nil
	}, func(left int64, _ error) op.Op { return c.stop(left) })
}

// ForceStopContainer stops the current instance with timeout 0: the grace
// period ran out while stopping (grace_expired). The preStop hook ran with
// the first stop. Raises stopped.
func (c *Container) ForceStopContainer() op.Op { return c.stop(0) }

// stop is StopContainer of the current instance with grace seconds; it
// raises stopped when the instance is stopped (or gone) or there is none.
func (c *Container) stop(grace int64) op.Op {
	if c.id == "" {
		c.o.Raise(fsm.ContainerEventStopped)
		return op.Done(nil)
	}
	return op.StopContainer(c.id, grace, func(err error) op.Op {
		if err := cri.UnlessGone(err, fmt.Sprintf("stop container %q", c.o.Name())); err != nil {
			return op.Done(err)
		}
		c.o.Raise(fsm.ContainerEventStopped)
		return op.Done(nil)
	})
}

// Lifecycle hooks (kubelet kuberuntime_container.go startContainer and
// killContainer):
//
//   - postStart runs right after StartContainer; the container counts as
//     started only when it returned. When it fails the container is killed
//     (its preStop runs too, as in kubelet) and start_failed is raised with
//     the waiting reason PostStartHookError; the restart policy decides.
//   - preStop runs once per running instance before its StopContainer,
//     bounded by the grace period; the seconds it took are subtracted from
//     the grace given to StopContainer, which gets at least
//     minGraceAfterPreStop seconds. A failing preStop is logged and the stop
//     goes on.
//
// The handlers run in engine/handlers: exec (CRI ExecSync; a non-zero exit
// code is a failure), httpGet (only no answer is a failure; the host
// defaults to the pod IP) and sleep (on the engine's clock). tcpSocket is
// not a valid hook and is ignored.

// minGraceAfterPreStop is kubelet's minimumGracePeriodInSeconds: a container
// whose preStop ate its grace period still gets this long after SIGTERM.
const minGraceAfterPreStop = 2

func (c *Container) postStartHook() *v1.LifecycleHandler {
	if spec := c.o.Spec(); spec != nil && spec.Lifecycle != nil {
		return spec.Lifecycle.PostStart
	}
	return nil
}

func (c *Container) preStopHook() *v1.LifecycleHandler {
	if spec := c.o.Spec(); spec != nil && spec.Lifecycle != nil {
		return spec.Lifecycle.PreStop
	}
	return nil
}

// HookTarget is the current instance as handlers run hooks and probes
// against it.
func (c *Container) HookTarget() handlers.Target {
	return handlers.Target{Runtime: c.o.Runtime(), Clock: c.o.Clock(), ID: c.id, Name: c.o.Name(), PodIP: c.o.PodIP(), Spec: c.o.Spec()}
}

// runPreStop runs preStop hook h against target, the current instance,
// bounded by grace seconds (StopContainer decides whether it runs: once
// per started instance with a grace period left). It returns the grace
// left for StopContainer.
func (c *Container) runPreStop(ctx context.Context, target handlers.Target, h *v1.LifecycleHandler, grace int64) int64 {
	clk := c.o.Clock()
	start := clk.Now()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- target.Hook(hctx, "PreStop", h, time.Duration(grace)*time.Second) }()
	t := clk.NewTimer(time.Duration(grace) * time.Second)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			c.o.Logger().Warn("FailedPreStopHook", "pod", c.o.Key(), "container", c.o.Name(), "err", err)
			c.o.Event(v1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed: %v", err)
		}
	case <-t.C():
		msg := fmt.Sprintf("PreStop hook of container %q did not finish within %ds", c.o.Name(), grace)
		c.o.Logger().Warn("FailedPreStopHook", "pod", c.o.Key(), "container", c.o.Name(), "err", msg)
		c.o.Event(v1.EventTypeWarning, "FailedPreStopHook", "%s", msg)
	}
	left := grace - int64(clk.Since(start)/time.Second)
	return max(left, minGraceAfterPreStop)
}
