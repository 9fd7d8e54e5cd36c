package podspec

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Objects reads the configMaps and secrets of the pod's namespace that a
// container's env and envFrom name. A missing object's error satisfies
// k8s.io/apimachinery/pkg/api/errors.IsNotFound (as client-go's do).
type Objects interface {
	ConfigMap(name string) (*v1.ConfigMap, error)
	Secret(name string) (*v1.Secret, error)
}

// ConfigError is an error in the configuration of a container that kubelet
// reports as CreateContainerConfigError: Message is kubelet's text (the
// container's waiting message), Error names the pod and the container too.
type ConfigError struct {
	Pod, Container string
	Err            error
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("pod %s container %q: %v", e.Pod, e.Container, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// Message is the container's waiting message, kubelet's text.
func (e *ConfigError) Message() string { return e.Err.Error() }

// envBuilder collects variables in the order they were first set.
type envBuilder struct {
	order []string
	vals  map[string]string
}

func (b *envBuilder) set(k, v string) {
	if _, ok := b.vals[k]; !ok {
		b.order = append(b.order, k)
	}
	b.vals[k] = v
}

// environment is the container's environment as kubelet's
// makeEnvironmentVariables builds it: first envFrom (configMaps and secrets,
// each key with the source's prefix; an optional source that does not
// exist contributes nothing; keys are taken as they are, as kubelet 1.34
// does), then env in declaration order, where a value has its $(VAR)
// references to variables set so far and to the service variables
// expanded, and valueFrom reads a pod field (fieldRef), a resource of the
// container (resourceFieldRef; a missing limit is the node's allocatable),
// or a key of a configMap or secret (optional: a missing object or key
// leaves the variable out); last, the service variables (r.ServiceEnv)
// that the container does not set itself. It returns the CRI list and the
// variables by name (command, args and subPathExpr expand them).
//
// An error (a missing object or key that is not optional, an unknown field
// path or resource) is a *ConfigError with kubelet's message.
func environment(n Node, r ContainerRequest) ([]*runtimeapi.KeyValue, map[string]string, error) {
	pod, c := r.Pod, r.Container
	fail := func(err error) ([]*runtimeapi.KeyValue, map[string]string, error) {
		return nil, nil, &ConfigError{Pod: pod.Namespace + "/" + pod.Name, Container: c.Name, Err: err}
	}
	env := envBuilder{vals: map[string]string{}}
	// getCM and getSecret return nil, nil for a missing optional object.
	var readCM func(string) (*v1.ConfigMap, error)
	var readSecret func(string) (*v1.Secret, error)
	if r.Objects != nil {
		readCM, readSecret = r.Objects.ConfigMap, r.Objects.Secret
	}
	getCM := readOnce(pod.Namespace, "configMap", readCM)
	getSecret := readOnce(pod.Namespace, "secret", readSecret)
	for _, from := range c.EnvFrom {
		var data map[string]string
		var err error
		switch {
		case from.ConfigMapRef != nil:
			data, err = objectData(getCM, configMapData, from.ConfigMapRef.Name, isTrue(from.ConfigMapRef.Optional))
		case from.SecretRef != nil:
			data, err = objectData(getSecret, secretData, from.SecretRef.Name, isTrue(from.SecretRef.Optional))
		}
		if err != nil {
			return fail(err)
		}
		for _, k := range sortedKeys(data) {
			env.set(from.Prefix+k, data[k])
		}
	}
	lookup := func(name string) (string, bool) {
		if v, ok := env.vals[name]; ok {
			return v, true
		}
		v, ok := r.ServiceEnv[name]
		return v, ok
	}
	for _, e := range c.Env {
		val := e.Value
		switch {
		case val != "":
			val = expandWith(val, lookup)
		case e.ValueFrom == nil:
		case e.ValueFrom.FieldRef != nil:
			v, err := podFieldValue(n, r, e.ValueFrom.FieldRef.FieldPath)
			if err != nil {
				return fail(err)
			}
			val = v
		case e.ValueFrom.ResourceFieldRef != nil:
			v, err := resourceValue(n, pod, c, e.ValueFrom.ResourceFieldRef)
			if err != nil {
				return fail(err)
			}
			val = v
		case e.ValueFrom.ConfigMapKeyRef != nil, e.ValueFrom.SecretKeyRef != nil:
			var v string
			var ok bool
			var err error
			if ref := e.ValueFrom.ConfigMapKeyRef; ref != nil {
				v, ok, err = keyValue(getCM, configMapData, pod.Namespace, "ConfigMap", ref.Name, ref.Key, isTrue(ref.Optional))
			} else {
				ref := e.ValueFrom.SecretKeyRef
				v, ok, err = keyValue(getSecret, secretData, pod.Namespace, "Secret", ref.Name, ref.Key, isTrue(ref.Optional))
			}
			if err != nil {
				return fail(err)
			}
			if !ok {
				continue
			}
			val = v
		case e.ValueFrom.FileKeyRef != nil:
			// Refused at admission (Unsupported); never silently empty.
			return fail(fmt.Errorf("env %q: valueFrom.fileKeyRef is not supported", e.Name))
		}
		env.set(e.Name, val)
	}
	for _, k := range sortedKeys(r.ServiceEnv) {
		if _, ok := env.vals[k]; !ok {
			env.set(k, r.ServiceEnv[k])
		}
	}
	kvs := make([]*runtimeapi.KeyValue, 0, len(env.order))
	for _, k := range env.order {
		kvs = append(kvs, &runtimeapi.KeyValue{Key: k, Value: []byte(env.vals[k])})
	}
	return kvs, env.vals, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// podFieldValue is a downward API fieldRef value for an environment
// variable, as kubelet's podFieldSelectorRuntimeValue: the node name (the
// pod's, else this node's), service account, host and pod addresses (the
// plural forms comma-separated), and the metadata fields.
func podFieldValue(n Node, r ContainerRequest, path string) (string, error) {
	pod := r.Pod
	switch path {
	case "spec.nodeName":
		if pod.Spec.NodeName != "" {
			return pod.Spec.NodeName, nil
		}
		return n.Name, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		if len(r.HostIPs) == 0 {
			return "", errors.New("failed to get host IP: the node has no address")
		}
		return r.HostIPs[0], nil
	case "status.hostIPs":
		if len(r.HostIPs) == 0 {
			return "", errors.New("failed to get host IPs: the node has no address")
		}
		return strings.Join(r.HostIPs, ","), nil
	case "status.podIP":
		if len(r.PodIPs) == 0 {
			return "", nil
		}
		return r.PodIPs[0], nil
	case "status.podIPs":
		return strings.Join(r.PodIPs, ","), nil
	}
	return metadataField(pod, path)
}

// metadataField is kubelet's fieldpath.ExtractFieldPathAsString for a pod:
// name, namespace, uid, generateName, resourceVersion, the labels and
// annotations (key="value" lines, sorted) and one label or annotation by
// metadata.labels['k'].
func metadataField(pod *v1.Pod, path string) (string, error) {
	if i := strings.Index(path, "['"); i >= 0 && strings.HasSuffix(path, "']") {
		key := path[i+2 : len(path)-2]
		switch path[:i] {
		case "metadata.annotations":
			return pod.Annotations[key], nil
		case "metadata.labels":
			return pod.Labels[key], nil
		}
		return "", fmt.Errorf("fieldPath %q does not support subscript", path)
	}
	switch path {
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.generateName":
		return pod.GenerateName, nil
	case "metadata.resourceVersion":
		return pod.ResourceVersion, nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %v", path)
}

// formatMap is kubelet's fieldpath.FormatMap: key="value" lines in key
// order (each line ends with a newline but the last).
func formatMap(m map[string]string) string {
	var b strings.Builder
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k + "=" + strconv.Quote(m[k]))
	}
	return b.String()
}

// resourceValue is a resourceFieldRef value of container c: its limit or
// request of cpu, memory, ephemeral-storage or hugepages-<size>, divided
// by the divisor (default 1) and rounded up. A limit the container does not
// set is the pod's limit (pod-level resources), else the node's allocatable
// (kubelet's defaultPodLimitsForDownwardAPI).
func resourceValue(n Node, pod *v1.Pod, c *v1.Container, ref *v1.ResourceFieldSelector) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported container resource : %v", ref.Resource)
	}
	rn := v1.ResourceName(name)
	switch {
	case rn == v1.ResourceCPU, rn == v1.ResourceMemory, rn == v1.ResourceEphemeralStorage:
	case strings.HasPrefix(name, v1.ResourceHugePagesPrefix):
	default:
		return "", fmt.Errorf("unsupported container resource : %v", ref.Resource)
	}
	var q resource.Quantity
	if kind == "requests" {
		q = c.Resources.Requests[rn]
	} else {
		var set bool
		if q, set = c.Resources.Limits[rn]; !set || q.IsZero() {
			if pl, ok := podLimit(pod, rn); ok {
				q = pl
			} else if a, ok := n.Allocatable[rn]; ok && !strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
				q = a
			}
		}
	}
	div := ref.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	if rn == v1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(div.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(div.Value()))), 10), nil
}

// podLimit is the pod-level limit of rn, if the pod sets one.
func podLimit(pod *v1.Pod, rn v1.ResourceName) (resource.Quantity, bool) {
	if pod.Spec.Resources == nil {
		return resource.Quantity{}, false
	}
	q, ok := pod.Spec.Resources.Limits[rn]
	return q, ok && !q.IsZero()
}

// readOnce returns a getter of the objects of kind (named in errors) in
// namespace ns that read reads (nil: no client), each read once; it
// answers nil, nil for a missing optional object.
func readOnce[T any](ns, kind string, read func(name string) (*T, error)) func(name string, optional bool) (*T, error) {
	got := map[string]*T{}
	return func(name string, optional bool) (*T, error) {
		if o, ok := got[name]; ok {
			return o, nil
		}
		if read == nil {
			return nil, fmt.Errorf("couldn't get %s %v/%v, no kubeClient defined", kind, ns, name)
		}
		o, err := read(name)
		if err != nil {
			if apierrors.IsNotFound(err) && optional {
				return nil, nil
			}
			return nil, err
		}
		got[name] = o
		return o, nil
	}
}

// keyValue is the value of key in the data of the object name of kind
// (ConfigMap or Secret, as kubelet's error names it) in namespace ns,
// read through get; ok is false when the object or the key is missing and
// optional.
func keyValue[T any, V string | []byte](get func(name string, optional bool) (*T, error), data func(*T) map[string]V, ns, kind, name, key string, optional bool) (val string, ok bool, err error) {
	o, err := get(name, optional)
	if err != nil || o == nil {
		return "", false, err
	}
	v, ok := data(o)[key]
	if !ok {
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %v in %s %v/%v", key, kind, ns, name)
	}
	return string(v), true, nil
}

// objectData is the data of the object name, read through get, with its
// values as strings; none for a missing optional object.
func objectData[T any, V string | []byte](get func(name string, optional bool) (*T, error), data func(*T) map[string]V, name string, optional bool) (map[string]string, error) {
	o, err := get(name, optional)
	if err != nil || o == nil {
		return nil, err
	}
	out := make(map[string]string, len(data(o)))
	for k, v := range data(o) {
		out[k] = string(v)
	}
	return out, nil
}

// configMapData is a configMap's data.
func configMapData(cm *v1.ConfigMap) map[string]string { return cm.Data }

// secretData is a secret's data.
func secretData(s *v1.Secret) map[string][]byte { return s.Data }
