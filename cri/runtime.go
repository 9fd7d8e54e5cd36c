package cri

import (
	"context"

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
}

// Runtime is a container runtime reached through the CRI.
type Runtime interface {
	RuntimeService
	ImageService
}
