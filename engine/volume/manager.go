package volume

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// Manager sets up and tears down the volumes of pods under Root.
type Manager struct {
	Root string
	API  API // nil: configMap, secret and serviceAccountToken volumes fail
	Node Node
	Now  func() time.Time // nil: time.Now

	tokens tokens
}

// MountError is a volume that could not be set up: kubelet's FailedMount.
type MountError struct {
	Volume string
	Type   string // the volume's kind, e.g. "configMap"
	Err    error
}

func (e *MountError) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q (%s): %v", e.Volume, e.Type, e.Err)
}

func (e *MountError) Unwrap() error { return e.Err }

// Plugin directory names, kubelet's.
const (
	pluginEmptyDir  = "kubernetes.io~empty-dir"
	pluginConfigMap = "kubernetes.io~configmap"
	pluginSecret    = "kubernetes.io~secret"
	pluginDownward  = "kubernetes.io~downward-api"
	pluginProjected = "kubernetes.io~projected"
)

// PodDir is the directory of pod uid under root.
func PodDir(root string, uid types.UID) string {
	return filepath.Join(root, "pods", string(uid))
}

// Type names the kind of a volume source by its field name ("emptyDir",
// "persistentVolumeClaim", ...); "" when none is set.
func Type(src *v1.VolumeSource) string {
	rv := reflect.ValueOf(src).Elem()
	for i := 0; i < rv.NumField(); i++ {
		if f := rv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			return strings.Split(rv.Type().Field(i).Tag.Get("json"), ",")[0]
		}
	}
	return ""
}

// HostPath is the directory (or file, for a hostPath) on the node that
// backs volume v of pod; "" for a kind this package does not support.
func HostPath(root string, pod *v1.Pod, v *v1.Volume) string {
	plugin := ""
	switch {
	case v.HostPath != nil:
		return v.HostPath.Path
	case v.EmptyDir != nil:
		plugin = pluginEmptyDir
	case v.ConfigMap != nil:
		plugin = pluginConfigMap
	case v.Secret != nil:
		plugin = pluginSecret
	case v.DownwardAPI != nil:
		plugin = pluginDownward
	case v.Projected != nil:
		plugin = pluginProjected
	default:
		return ""
	}
	return filepath.Join(PodDir(root, pod.UID), "volumes", plugin, v.Name)
}

// ReadOnlyKind reports a kind kubelet always mounts read-only into
// containers (its content is written by the agent only).
func ReadOnlyKind(v *v1.Volume) bool {
	return v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil
}

// Present reports whether volume v of pod was set up on this node before
// (by this agent or by its previous run): an emptyDir's directory exists,
// or the ..data of an atomically written volume does. Always false for a
// hostPath, which has nothing of its own on the node.
func Present(root string, pod *v1.Pod, v *v1.Volume) bool {
	dir := HostPath(root, pod, v)
	switch {
	case v.HostPath != nil || dir == "":
		return false
	case v.EmptyDir != nil:
		fi, err := os.Stat(dir)
		return err == nil && fi.IsDir()
	}
	_, err := os.Readlink(filepath.Join(dir, dataDirName))
	return err == nil
}

// Setup makes every volume of pod ready on the node, and refreshes the
// content of the API-backed ones (a changed configMap, secret, label or
// annotation, a token past 80% of its lifetime). It is idempotent and
// returns one *MountError per volume that failed, joined.
func (m *Manager) Setup(ctx context.Context, pod *v1.Pod) error {
	var errs []error
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if err := m.setup(ctx, pod, v); err != nil {
			errs = append(errs, &MountError{Volume: v.Name, Type: Type(&v.VolumeSource), Err: err})
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Manager) setup(ctx context.Context, pod *v1.Pod, v *v1.Volume) error {
	dir := HostPath(m.Root, pod, v)
	var payload map[string]File
	var err error
	switch {
	case v.HostPath != nil:
		return CheckHostPath(v.HostPath.Path, v.HostPath.Type)
	case v.EmptyDir != nil:
		// An emptyDir takes the fsGroup when it is made, once.
		if v.EmptyDir.Medium == v1.StorageMediumMemory {
			mounted, _ := IsMountPoint(dir)
			if err := MountTmpfs(dir, memorySize(pod, v.EmptyDir.SizeLimit)); err != nil || mounted || fsGroup(pod) == nil {
				return err
			}
			return SetOwnership(dir, *fsGroup(pod), false)
		}
		if v.EmptyDir.Medium != v1.StorageMediumDefault {
			return fmt.Errorf("emptyDir medium %q is not supported", v.EmptyDir.Medium)
		}
		_, statErr := os.Stat(dir)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return fmt.Errorf("create emptyDir: %w", err)
		}
		if !os.IsNotExist(statErr) {
			// Made by an earlier setup: a chmod now would clear the
			// fsGroup's setgid bit.
			return nil
		}
		if err := os.Chmod(dir, 0o777); err != nil || fsGroup(pod) == nil {
			return err
		}
		return SetOwnership(dir, *fsGroup(pod), false)
	case v.ConfigMap != nil:
		s := v.ConfigMap
		payload, err = configMapFiles(ctx, m.API, pod.Namespace, s.Name, s.Items, s.DefaultMode, optional(s.Optional))
	case v.Secret != nil:
		s := v.Secret
		payload, err = secretFiles(ctx, m.API, pod.Namespace, s.SecretName, s.Items, s.DefaultMode, optional(s.Optional))
		if err == nil {
			err = MountTmpfs(dir, 0)
		}
	case v.DownwardAPI != nil:
		payload, err = downwardFiles(pod, m.Node, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
	case v.Projected != nil:
		payload, err = m.projected(ctx, pod, v.Projected)
		if err == nil {
			err = MountTmpfs(dir, 0)
		}
	default:
		t := Type(&v.VolumeSource)
		if t == "" {
			return errors.New("the volume has no source")
		}
		return fmt.Errorf("volume type %q is not supported by speclet (supported: emptyDir, hostPath, configMap, secret, downwardAPI, projected)", t)
	}
	if err != nil {
		return err
	}
	gid := fsGroup(pod)
	if gid != nil {
		groupReadable(payload)
	}
	w := AtomicWriter{Dir: dir, Now: m.Now}
	if err := w.Write(payload); err != nil || gid == nil {
		return err
	}
	return SetOwnership(dir, *gid, true)
}

func (m *Manager) projected(ctx context.Context, pod *v1.Pod, p *v1.ProjectedVolumeSource) (map[string]File, error) {
	out := map[string]File{}
	for _, src := range p.Sources {
		var files map[string]File
		var err error
		switch {
		case src.ConfigMap != nil:
			s := src.ConfigMap
			files, err = configMapFiles(ctx, m.API, pod.Namespace, s.Name, s.Items, p.DefaultMode, optional(s.Optional))
		case src.Secret != nil:
			s := src.Secret
			files, err = secretFiles(ctx, m.API, pod.Namespace, s.Name, s.Items, p.DefaultMode, optional(s.Optional))
		case src.DownwardAPI != nil:
			files, err = downwardFiles(pod, m.Node, src.DownwardAPI.Items, p.DefaultMode)
		case src.ServiceAccountToken != nil:
			m.tokens.now = m.now
			var tok string
			tok, err = m.tokens.get(ctx, m.API, pod, src.ServiceAccountToken)
			files = map[string]File{src.ServiceAccountToken.Path: {Data: []byte(tok), Mode: mode(nil, p.DefaultMode)}}
		default:
			return nil, errors.New("projected source of an unsupported kind (supported: configMap, secret, downwardAPI, serviceAccountToken)")
		}
		if err != nil {
			return nil, err
		}
		maps.Copy(out, files)
	}
	return out, nil
}

// memorySize is the size of a medium Memory emptyDir: its sizeLimit, else
// the pod's memory limit when every container has one, else 0 (the
// kernel's default).
func memorySize(pod *v1.Pod, limit *resource.Quantity) int64 {
	if limit != nil && !limit.IsZero() {
		return limit.Value()
	}
	var sum int64
	for _, c := range pod.Spec.Containers {
		q, ok := c.Resources.Limits[v1.ResourceMemory]
		if !ok {
			return 0
		}
		sum += q.Value()
	}
	return sum
}

// TearDown unmounts every mount under the volumes of pod uid (tmpfs
// volumes) and forgets its tokens. The directories stay for the caller to
// remove.
func (m *Manager) TearDown(uid types.UID) error {
	m.tokens.forget(uid)
	return UnmountAll(filepath.Join(PodDir(m.Root, uid), "volumes"))
}

// SubPath resolves a volumeMount's subPath inside the volume's host
// directory as kubelet does: it must be relative without "..", may not
// leave the volume through a symlink, and a missing directory is created.
func SubPath(volumeDir, sub string) (string, error) {
	if filepath.IsAbs(sub) {
		return "", fmt.Errorf("subPath %q must be a relative path", sub)
	}
	for _, el := range strings.Split(sub, "/") {
		if el == ".." {
			return "", fmt.Errorf("subPath %q must not contain '..'", sub)
		}
	}
	base, err := filepath.EvalSymlinks(volumeDir)
	if err != nil {
		return "", fmt.Errorf("resolve volume directory: %w", err)
	}
	full := filepath.Join(base, sub)
	if _, err := os.Lstat(full); os.IsNotExist(err) {
		if err := os.MkdirAll(full, 0o750); err != nil {
			return "", fmt.Errorf("create subPath %q: %w", sub, err)
		}
	}
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return "", fmt.Errorf("resolve subPath %q: %w", sub, err)
	}
	if real != base && !strings.HasPrefix(real, base+"/") {
		return "", fmt.Errorf("subPath %q leaves the volume (resolves to %s)", sub, real)
	}
	return real, nil
}
