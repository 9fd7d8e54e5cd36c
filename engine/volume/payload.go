package volume

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultMode is the mode of a file when neither the item's mode nor the
// volume's defaultMode is given (kubelet's 0644).
const DefaultMode os.FileMode = 0o644

// ErrNoAPI is the cause of a FailedMount for a volume that needs the API
// server when the agent runs without one (no --kubeconfig).
var ErrNoAPI = errors.New("no API server client (speclet runs without --kubeconfig)")

// Node is what a downward API resourceFieldRef falls back to when the
// container sets no limit: the node's allocatable CPU and memory.
type Node struct {
	CPU    resource.Quantity
	Memory resource.Quantity
}

func mode(item *int32, def *int32) os.FileMode {
	switch {
	case item != nil:
		return os.FileMode(*item)
	case def != nil:
		return os.FileMode(*def)
	}
	return DefaultMode
}

func optional(b *bool) bool { return b != nil && *b }

// keyItems maps data (key -> bytes) through items as kubelet does: no
// items projects every key onto a file of its name; with items each key
// must exist unless the volume is optional.
func keyItems(kind, name string, data map[string][]byte, items []v1.KeyToPath, defMode *int32, opt bool) (map[string]File, error) {
	out := map[string]File{}
	if len(items) == 0 {
		for k, b := range data {
			out[k] = File{Data: b, Mode: mode(nil, defMode)}
		}
		return out, nil
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			if opt {
				continue
			}
			return nil, fmt.Errorf("%s %q references non-existent %s key: %s", kind, name, kind, it.Key)
		}
		out[it.Path] = File{Data: b, Mode: mode(it.Mode, defMode)}
	}
	return out, nil
}

func configMapData(cm *v1.ConfigMap) map[string][]byte {
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, s := range cm.Data {
		data[k] = []byte(s)
	}
	for k, b := range cm.BinaryData {
		data[k] = b
	}
	return data
}

// configMapFiles is the payload of a configMap volume or projection. A
// missing configMap is an empty payload when optional.
func configMapFiles(ctx context.Context, api API, ns, name string, items []v1.KeyToPath, defMode *int32, opt bool) (map[string]File, error) {
	cm, err := fetch(api, "configMap", "configmap", name, opt, func(api API) (*v1.ConfigMap, error) { return api.GetConfigMap(ctx, ns, name) })
	if err != nil || cm == nil {
		return emptyUnless(err)
	}
	return keyItems("configmap", name, configMapData(cm), items, defMode, opt)
}

// secretFiles is the payload of a secret volume or projection. A missing
// secret is an empty payload when optional.
func secretFiles(ctx context.Context, api API, ns, name string, items []v1.KeyToPath, defMode *int32, opt bool) (map[string]File, error) {
	s, err := fetch(api, "secret", "secret", name, opt, func(api API) (*v1.Secret, error) { return api.GetSecret(ctx, ns, name) })
	if err != nil || s == nil {
		return emptyUnless(err)
	}
	data := make(map[string][]byte, len(s.Data)+len(s.StringData))
	for k, b := range s.Data {
		data[k] = b
	}
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	return keyItems("secret", name, data, items, defMode, opt)
}

// downwardFiles is the payload of a downwardAPI volume or projection.
func downwardFiles(pod *v1.Pod, node Node, items []v1.DownwardAPIVolumeFile, defMode *int32) (map[string]File, error) {
	out := map[string]File{}
	for _, it := range items {
		var val string
		var err error
		switch {
		case it.FieldRef != nil:
			val, err = podField(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			val, err = containerResource(pod, node, it.ResourceFieldRef)
		default:
			err = fmt.Errorf("item %q has neither fieldRef nor resourceFieldRef", it.Path)
		}
		if err != nil {
			return nil, err
		}
		out[it.Path] = File{Data: []byte(val), Mode: mode(it.Mode, defMode)}
	}
	return out, nil
}

// podField is a downward API fieldRef value: metadata.name, namespace,
// uid, labels and annotations (one key="quoted value" per line, sorted),
// and a single label or annotation by metadata.labels['k'].
func podField(pod *v1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if strings.HasPrefix(path, prefix+"['") && strings.HasSuffix(path, "']") {
			return m[path[len(prefix)+2:len(path)-2]], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldRef fieldPath %q in a downwardAPI volume", path)
}

func formatMap(m map[string]string) string {
	lines := make([]string, 0, len(m))
	for k, v := range m {
		lines = append(lines, k+"="+strconv.Quote(v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// containerResource is a resourceFieldRef value: the container's limit or
// request divided by divisor, rounded up (limits default to the node's
// allocatable, as kubelet's).
func containerResource(pod *v1.Pod, node Node, ref *v1.ResourceFieldSelector) (string, error) {
	var c *v1.Container
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == ref.ContainerName {
				c = &list[i]
			}
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: no container %q in the pod", ref.ContainerName)
	}
	var q resource.Quantity
	var ok bool
	switch ref.Resource {
	case "limits.cpu":
		if q, ok = c.Resources.Limits[v1.ResourceCPU]; !ok {
			q = node.CPU
		}
	case "limits.memory":
		if q, ok = c.Resources.Limits[v1.ResourceMemory]; !ok {
			q = node.Memory
		}
	case "requests.cpu":
		q = c.Resources.Requests[v1.ResourceCPU]
	case "requests.memory":
		q = c.Resources.Requests[v1.ResourceMemory]
	case "limits.ephemeral-storage", "requests.ephemeral-storage":
		q = c.Resources.Limits[v1.ResourceEphemeralStorage]
		if ref.Resource[0] == 'r' {
			q = c.Resources.Requests[v1.ResourceEphemeralStorage]
		}
	default:
		return "", fmt.Errorf("unsupported resourceFieldRef resource %q", ref.Resource)
	}
	div := ref.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	if strings.HasSuffix(ref.Resource, ".cpu") {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(div.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(div.Value()))), 10), nil
}

// fetch reads the object name of kind through get on api: nil, with no
// error, when it is missing and opt. Errors name it as kubelet does: kind
// when there is no API, errKind otherwise.
func fetch[T any](api API, kind, errKind, name string, opt bool, get func(API) (*T, error)) (*T, error) {
	if api == nil {
		return nil, fmt.Errorf("%s %q: %w", kind, name, ErrNoAPI)
	}
	o, err := get(api)
	if apierrors.IsNotFound(err) && opt {
		return nil, nil
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s %q not found", errKind, name)
		}
		return nil, fmt.Errorf("get %s %q: %w", errKind, name, err)
	}
	return o, nil
}

// emptyUnless is the payload of an object that could not be read: none
// with err, or an empty one (a missing optional object).
func emptyUnless(err error) (map[string]File, error) {
	if err != nil {
		return nil, err
	}
	return map[string]File{}, nil
}
