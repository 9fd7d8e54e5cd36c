package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
	goyaml "sigs.k8s.io/yaml/goyaml.v2"

	"github.com/speclet/speclet/engine/staticuid"
)

// Limits on what a manifest may hold. Annotations, labels and names follow
// kubelet's (the API server's) validation; the others bound what speclet
// writes to the runtime (see MaxContainerRecordBytes in package engine).
const (
	// MaxManifestBytes is the largest manifest file or URL body read.
	MaxManifestBytes = 10 << 20
	// MaxAnnotationBytes is the total size of a pod's annotation keys and
	// values, as the API server checks (apivalidation.TotalAnnotationSizeLimitB).
	MaxAnnotationBytes = apivalidation.TotalAnnotationSizeLimitB
	// MaxImageLength bounds a container's image reference: a registry
	// reference is at most 255 characters of name, a 128-character tag and
	// a digest.
	MaxImageLength = 512
	// MaxContainers bounds init plus regular containers of one pod, so
	// that one pod's containers fit in one CRI list reply
	// (engine/worker/requests.go).
	MaxContainers = 24
)

// ManifestError says what is wrong with one manifest: where it came from
// (a file path or a URL, with the item index for lists), the field at fault
// (empty when the manifest could not be decoded at all) and why.
type ManifestError struct {
	Origin string
	Field  string
	Msg    string
}

func (e *ManifestError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("manifest %s: %s", e.Origin, e.Msg)
	}
	return fmt.Sprintf("manifest %s: field %s: %s", e.Origin, e.Field, e.Msg)
}

// decodeChecked decodes data, which checkDocument turned into j, into into
// and refuses the fields the v1 API does not know, so that a typo does not
// go unnoticed. The YAML is parsed once more for into (the conversion to
// JSON follows into's field types, so that `value: 8080` fills a string).
// The unknown fields are named by their paths (like
// "spec.containers[0].imagePullPolicey") by the API machinery's strict JSON
// decoding of j (sigs.k8s.io/json, kube-apiserver's fieldValidation=Strict:
// case-sensitive); where j's untyped scalars do not fit the type, by
// sigs.k8s.io/yaml's strict decoding, which converts as into's did and
// names the first unknown field without its path.
func decodeChecked(data, j []byte, origin string, into any) error {
	if err := yaml.Unmarshal(data, into); err != nil {
		return &ManifestError{Origin: origin, Msg: "decode: " + cleanDecodeError(err)}
	}
	scratch := reflect.New(reflect.TypeOf(into).Elem()).Interface()
	unknown, err := kjson.UnmarshalStrict(j, scratch, kjson.DisallowUnknownFields)
	if err != nil {
		if err := yaml.UnmarshalStrict(data, scratch); err != nil {
			return &ManifestError{Origin: origin, Msg: "decode: " + cleanDecodeError(err)}
		}
		return nil
	}
	var errs []error
	for _, e := range unknown {
		if fe, ok := e.(kjson.FieldError); ok {
			errs = append(errs, &ManifestError{Origin: origin, Field: fe.FieldPath(), Msg: "unknown field (not in the v1 API)"})
		}
	}
	return errors.Join(errs...)
}

// cleanDecodeError drops the wrapping the YAML-to-JSON conversion adds.
func cleanDecodeError(err error) string {
	s := err.Error()
	for _, p := range []string{"error unmarshaling JSON: ", "while decoding JSON: "} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

// checkDocument refuses what the YAML decoder would silently drop: a file
// of several YAML documents (only the first would run) and a mapping with a
// key given twice (the last would win).
// It returns the document as JSON.
func checkDocument(data []byte, origin string) ([]byte, error) {
	dec := goyaml.NewDecoder(bytes.NewReader(data))
	docs := 0
	for {
		var v any
		err := dec.Decode(&v)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &ManifestError{Origin: origin, Msg: "decode: " + cleanDecodeError(err)}
		}
		if v != nil {
			docs++
		}
	}
	if docs > 1 {
		return nil, &ManifestError{Origin: origin, Msg: fmt.Sprintf("%d YAML documents (separated by ---); a manifest holds one pod: put each pod in its own file", docs)}
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, &ManifestError{Origin: origin, Msg: "duplicate key: " + cleanDecodeError(err)}
	}
	return j, nil
}

// decodePod decodes one v1 Pod manifest.
func decodePod(data []byte, origin string) (*v1.Pod, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, &ManifestError{Origin: origin, Msg: "empty manifest"}
	}
	j, err := checkDocument(data, origin)
	if err != nil {
		return nil, err
	}
	// kind and apiVersion from the JSON (another YAML parse would copy a
	// large manifest again); a number or bool is taken as its text, as the
	// YAML decoder does for a string field.
	var raw struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
	}
	if err := json.Unmarshal(j, &raw); err != nil {
		return nil, &ManifestError{Origin: origin, Msg: "decode: " + cleanDecodeError(err)}
	}
	text := func(v any) string {
		if v == nil {
			return ""
		}
		return fmt.Sprint(v)
	}
	tm := metav1.TypeMeta{APIVersion: text(raw.APIVersion), Kind: text(raw.Kind)}
	if err := checkKind(tm, origin, "Pod"); err != nil {
		return nil, err
	}
	pod := &v1.Pod{}
	if err := decodeChecked(data, j, origin, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

func checkKind(tm metav1.TypeMeta, origin string, kinds ...string) error {
	if tm.Kind == "" {
		return &ManifestError{Origin: origin, Field: "kind", Msg: fmt.Sprintf("missing; want %s", strings.Join(kinds, " or "))}
	}
	ok := false
	for _, k := range kinds {
		ok = ok || tm.Kind == k
	}
	if !ok {
		return &ManifestError{Origin: origin, Field: "kind", Msg: fmt.Sprintf("%q is not supported; want %s", tm.Kind, strings.Join(kinds, " or "))}
	}
	if tm.APIVersion != "v1" {
		return &ManifestError{Origin: origin, Field: "apiVersion", Msg: fmt.Sprintf("%q is not supported; want \"v1\"", tm.APIVersion)}
	}
	return nil
}

// staticPod validates a decoded manifest and turns it into the pod the
// engine runs, as kubelet's applyDefaults does for static pods: kubelet's
// UID (engine/staticuid: the manifest, and for a file the node name and the
// path; unless the manifest sets one), the name "<name>-<node-name>", namespace "default" when none is
// given, spec.nodeName, the config annotations, the NoExecute toleration, the
// API defaults the engine relies on, and phase Pending.
//
// origin names the manifest in errors; key (the file path or the URL) goes
// into the hash.
func staticPod(pod *v1.Pod, source, origin, key, nodeName string) (*v1.Pod, error) {
	if err := validatePod(pod, origin, nodeName); err != nil {
		return nil, err
	}
	pod = pod.DeepCopy()
	if pod.UID == "" {
		// kubelet's UID, so that either agent adopts the other's pod.
		uid, err := staticuid.Of(pod, uidSource(source), key, nodeName)
		if err != nil {
			return nil, &ManifestError{Origin: origin, Msg: err.Error()}
		}
		pod.UID = uid
	}
	pod.Name = staticPodName(pod.Name, nodeName)
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	pod.Spec.NodeName = nodeName
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[AnnotationSource] = source
	pod.Annotations[AnnotationHash] = string(pod.UID)
	addNoExecuteToleration(pod)
	applyDefaults(pod)
	pod.Status = v1.PodStatus{Phase: v1.PodPending}
	return pod, nil
}

// uidSource is the name a pod source has in kubelet's static pod UID.
func uidSource(source string) string {
	if source == SourceFile {
		return staticuid.File
	}
	return staticuid.URL
}

func staticPodName(name, nodeName string) string {
	return name + "-" + strings.ToLower(nodeName)
}

func addNoExecuteToleration(pod *v1.Pod) {
	for _, t := range pod.Spec.Tolerations {
		if t.Operator == v1.TolerationOpExists && t.Key == "" && t.Effect == v1.TaintEffectNoExecute {
			return
		}
	}
	pod.Spec.Tolerations = append(pod.Spec.Tolerations, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
}

// Defaults the API server would apply and the engine relies on.
const (
	DefaultTerminationGracePeriodSeconds int64 = 30
	DefaultTerminationMessagePath              = "/dev/termination-log"
	DefaultSchedulerName                       = "default-scheduler"
)

// applyDefaults fills the fields the API server's defaulting would, for the
// parts of the pod speclet reads.
func applyDefaults(pod *v1.Pod) {
	s := &pod.Spec
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.SchedulerName == "" {
		s.SchedulerName = DefaultSchedulerName
	}
	if s.TerminationGracePeriodSeconds == nil {
		g := DefaultTerminationGracePeriodSeconds
		s.TerminationGracePeriodSeconds = &g
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &v1.PodSecurityContext{}
	}
	if s.EnableServiceLinks == nil {
		t := true
		s.EnableServiceLinks = &t
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i], s.HostNetwork)
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i], s.HostNetwork)
	}
}

func defaultContainer(c *v1.Container, hostNetwork bool) {
	// A limit without a request is also the request (the API server's
	// defaulting): it makes a pod with only limits Guaranteed.
	for name, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = v1.ResourceList{}
			}
			c.Resources.Requests[name] = q.DeepCopy()
		}
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = DefaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = DefaultTerminationMessagePath
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = v1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
}

// DefaultPullPolicy is the API server's default: Always for an image with no
// tag or the tag "latest" (and no digest), IfNotPresent otherwise.
func DefaultPullPolicy(image string) v1.PullPolicy {
	if strings.Contains(image, "@") {
		return v1.PullIfNotPresent
	}
	tag := ""
	if i := strings.LastIndexByte(image, ':'); i >= 0 && !strings.Contains(image[i+1:], "/") {
		tag = image[i+1:]
	}
	if tag == "" || tag == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}
