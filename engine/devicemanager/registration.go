package devicemanager

import (
	"context"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// registration is the v1beta1 Registration service.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	m *Manager
}

// Register registers a device plugin (kubelet's server.Register): its API
// version must be one kubelet supports, its resource name an extended
// resource name, its endpoint a socket name in the device-plugins
// directory that answers (dialled, GetDevicePluginOptions). A refusal is
// the registration's error only: nothing else changes.
func (r registration) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	m := r.m
	select {
	case m.sem <- struct{}{}:
		defer func() { <-m.sem }()
	default:
		m.log.Warn("device plugin registration refused: too many in progress", "resource", req.ResourceName, "max", MaxRegistrations)
		return nil, status.Errorf(codes.ResourceExhausted, "registration of %q refused: %d registrations are in progress; try again", req.ResourceName, MaxRegistrations)
	}
	if err := m.validate(req); err != nil {
		m.log.Error("bad registration request from device plugin", "resource", req.ResourceName, "version", req.Version, "endpoint", req.Endpoint, "err", err)
		return nil, err
	}
	e, err := dial(ctx, req.ResourceName, filepath.Join(m.cfg.Dir, req.Endpoint))
	if err != nil {
		m.log.Error("device plugin registration failed", "resource", req.ResourceName, "endpoint", req.Endpoint, "err", err)
		return nil, status.Errorf(codes.Unavailable, "register %q: %v", req.ResourceName, err)
	}
	m.connected(e)
	return &pluginapi.Empty{}, nil
}

// validate checks a registration request before anything is dialled.
func (m *Manager) validate(req *pluginapi.RegisterRequest) error {
	if !supported(req.Version) {
		return status.Errorf(codes.InvalidArgument, "requested API version %q is not supported by kubelet. Supported version is %q", req.Version, pluginapi.SupportedVersions)
	}
	if !IsExtendedResourceName(req.ResourceName) {
		return status.Errorf(codes.InvalidArgument, "the ResourceName %q is invalid", req.ResourceName)
	}
	ep := req.Endpoint
	if ep == "" || ep != filepath.Base(ep) || ep == "." || ep == ".." || ep == SocketName {
		return status.Errorf(codes.InvalidArgument, "the Endpoint %q of %q is not the name of a socket in %s", ep, req.ResourceName, m.cfg.Dir)
	}
	m.mu.Lock()
	_, known := m.endpoints[req.ResourceName]
	n := len(m.endpoints)
	m.mu.Unlock()
	if !known && n >= MaxResources {
		return status.Errorf(codes.ResourceExhausted, "registration of %q refused: %d resources are registered, the most this node takes", req.ResourceName, MaxResources)
	}
	return nil
}

func supported(version string) bool {
	for _, v := range pluginapi.SupportedVersions {
		if v == version {
			return true
		}
	}
	return false
}

// IsExtendedResourceName is kubelet's v1helper.IsExtendedResourceName: a
// name with a domain that is not kubernetes.io's (nor requests.), valid as
// a qualified name once prefixed with "requests.".
func IsExtendedResourceName(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, v1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(name, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+name)) == 0
}
