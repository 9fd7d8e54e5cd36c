package cri

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeService is the part of the CRI runtime service speclet uses.
// Every method is safe for concurrent use. Errors returned by the gRPC client
// are *Error values carrying the endpoint, the call and a Class.
type RuntimeService interface {
	Version(ctx context.Context) (*runtimeapi.VersionResponse, error)
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)

	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	StopPodSandbox(ctx context.Context, podSandboxID string) error
	RemovePodSandbox(ctx context.Context, podSandboxID string) error
	PodSandboxStatus(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStatus, error)
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)

	CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, containerID string) error
	// StopContainer stops a container, killing it timeout seconds after SIGTERM.
	StopContainer(ctx context.Context, containerID string, timeout int64) error
	RemoveContainer(ctx context.Context, containerID string) error
	ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	// ListContainerStats returns the resource usage of the containers that
	// match filter (nil: all): memory working set, writable layer bytes
	// and inodes.
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	// ExecSync runs cmd in a running container and waits for it to exit, at
	// most timeout (rounded up to whole seconds; 0 = no bound but the
	// caller's context). A command that ran and exited non-zero is not an
	// error: its code is in the result. A runtime that gave up on the
	// command after timeout returns an error of class DeadlineExceeded.
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (ExecResult, error)

	// GetContainerEvents streams container events into ch until ctx ends or
	// the stream breaks. A runtime that does not implement it returns an error
	// of class Unimplemented at once.
	GetContainerEvents(ctx context.Context, ch chan<- *runtimeapi.ContainerEventResponse) error
}

// ImageService is the part of the CRI image service speclet uses.
type ImageService interface {
	// PullImage pulls an image and returns its reference (image id).
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	// ImageStatus returns nil, nil when the image is not present.
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec) (*runtimeapi.Image, error)
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	// RemoveImage removes an image (by id or reference); removing an image
	// that is not present is not an error (the CRI contract).
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
	// ImageFsInfo returns the usage of the filesystems images are stored
	// on: image_filesystems (and, from runtimes that split them,
	// container_filesystems), each with its mountpoint and used bytes.
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// Runtime is a container runtime reached through the CRI.
type Runtime interface {
	RuntimeService
	ImageService
}

// Logs is the CRI's log maintenance part.
type Logs interface {
	// ReopenContainerLog asks the runtime to reopen a container's log file
	// at its path, after the caller renamed it away (log rotation).
	ReopenContainerLog(ctx context.Context, containerID string) error
}

// Full is every CRI call speclet makes: the lifecycle's Runtime, the
// kubelet API's Streaming and Stats, log rotation's Logs. *Client
// implements it; what is done around every call (WithMetrics, the CRI
// audit's recorder) is a gRPC interceptor on the client (WithInterceptors),
// so that one client serves every caller.
type Full interface {
	Runtime
	Streaming
	Stats
	Logs
}

// ExecResult is what a command run by ExecSync printed and its exit code.
type ExecResult struct {
	Stdout, Stderr []byte
	ExitCode       int32
}
