package podspec

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// fakeObjects serves configMaps and secrets by name; others are NotFound.
type fakeObjects struct {
	cms     map[string]map[string]string
	secrets map[string]map[string]string
}

func (f fakeObjects) ConfigMap(name string) (*v1.ConfigMap, error) {
	d, ok := f.cms[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
	}
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: d}, nil
}

func (f fakeObjects) Secret(name string) (*v1.Secret, error) {
	d, ok := f.secrets[name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	s := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{}}
	for k, v := range d {
		s.Data[k] = []byte(v)
	}
	return s, nil
}

func fieldEnv(name, path string) v1.EnvVar {
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
}

func resEnv(name, res, div string) v1.EnvVar {
	ref := &v1.ResourceFieldSelector{Resource: res}
	if div != "" {
		ref.Divisor = resource.MustParse(div)
	}
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{ResourceFieldRef: ref}}
}

func cmEnv(name, cm, key string, optional bool) v1.EnvVar {
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: cm}, Key: key, Optional: ptr.To(optional)}}}
}

func secretEnv(name, s, key string, optional bool) v1.EnvVar {
	return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: s}, Key: key, Optional: ptr.To(optional)}}}
}

// TestEnvironment: each source of a container's environment, field by
// field, as kubelet's makeEnvironmentVariables builds it.
func TestEnvironment(t *testing.T) {
	objs := fakeObjects{
		cms:     map[string]map[string]string{"cfg": {"data-1": "value-1", "data-2": "value-2"}, "other": {"data-1": "other-1"}},
		secrets: map[string]map[string]string{"sec": {"data-1": "secret-1", "bad key": "x"}},
	}
	n := Node{Name: "node-a", Allocatable: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourceEphemeralStorage: resource.MustParse("100Gi")}}
	base := func() *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1",
			Labels: map[string]string{"app": "web", "tier": "front"}, Annotations: map[string]string{"note": "a \"quoted\" value"}},
			Spec: v1.PodSpec{ServiceAccountName: "sa"}}
	}
	for _, tc := range []struct {
		name     string
		pod      func(*v1.Pod)
		c        v1.Container
		objects  Objects
		podIPs   []string
		service  map[string]string
		want     map[string]string // every variable of the result
		order    []string          // when set, the order of the result
		err      string            // kubelet's message
		noConfig bool              // the error is not a ConfigError
	}{
		{name: "plain value", c: v1.Container{Env: []v1.EnvVar{{Name: "A", Value: "1"}}}, want: map[string]string{"A": "1"}},
		{name: "composed from earlier variables", c: v1.Container{Env: []v1.EnvVar{
			{Name: "FOO", Value: "foo-value"}, {Name: "BAR", Value: "bar-value"},
			{Name: "FOOBAR", Value: "$(FOO);;$(BAR)"}, {Name: "LATER", Value: "$(NEXT)"}, {Name: "NEXT", Value: "n"}, {Name: "ESC", Value: "$$(FOO)"}}},
			want:  map[string]string{"FOO": "foo-value", "BAR": "bar-value", "FOOBAR": "foo-value;;bar-value", "LATER": "$(NEXT)", "NEXT": "n", "ESC": "$(FOO)"},
			order: []string{"FOO", "BAR", "FOOBAR", "LATER", "NEXT", "ESC"}},
		{name: "metadata fields", c: v1.Container{Env: []v1.EnvVar{
			fieldEnv("NAME", "metadata.name"), fieldEnv("NS", "metadata.namespace"), fieldEnv("UID", "metadata.uid"),
			fieldEnv("APP", "metadata.labels['app']"), fieldEnv("NOTE", "metadata.annotations['note']"), fieldEnv("NONE", "metadata.labels['none']"),
			fieldEnv("LABELS", "metadata.labels")}},
			want: map[string]string{"NAME": "p", "NS": "ns", "UID": "uid-1", "APP": "web", "NOTE": `a "quoted" value`, "NONE": "",
				"LABELS": "app=\"web\"\ntier=\"front\""}},
		{name: "spec and status fields", c: v1.Container{Env: []v1.EnvVar{
			fieldEnv("NODE", "spec.nodeName"), fieldEnv("SA", "spec.serviceAccountName"),
			fieldEnv("HOST_IP", "status.hostIP"), fieldEnv("HOST_IPS", "status.hostIPs"),
			fieldEnv("POD_IP", "status.podIP"), fieldEnv("POD_IPS", "status.podIPs")}},
			podIPs: []string{"10.1.0.5", "fd00::5"},
			want: map[string]string{"NODE": "node-a", "SA": "sa", "HOST_IP": "192.0.2.1", "HOST_IPS": "192.0.2.1",
				"POD_IP": "10.1.0.5", "POD_IPS": "10.1.0.5,fd00::5"}},
		{name: "the pod's nodeName first", pod: func(p *v1.Pod) { p.Spec.NodeName = "bound" },
			c: v1.Container{Env: []v1.EnvVar{fieldEnv("NODE", "spec.nodeName")}}, want: map[string]string{"NODE": "bound"}},
		{name: "valueFrom is not expanded", pod: func(p *v1.Pod) { p.Labels["app"] = "$(A)" },
			c: v1.Container{Env: []v1.EnvVar{{Name: "A", Value: "1"}, fieldEnv("APP", "metadata.labels['app']")}}, want: map[string]string{"A": "1", "APP": "$(A)"}},
		{name: "unsupported field path", c: v1.Container{Env: []v1.EnvVar{fieldEnv("X", "spec.restartPolicy")}}, err: "unsupported fieldPath: spec.restartPolicy"},
		{name: "resources", c: v1.Container{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi"), v1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1250m"), v1.ResourceMemory: resource.MustParse("64Mi"), v1.ResourceEphemeralStorage: resource.MustParse("2Gi")}},
			Env: []v1.EnvVar{resEnv("CPU_LIMIT", "limits.cpu", ""), resEnv("CPU_LIMIT_M", "limits.cpu", "1m"), resEnv("CPU_REQUEST", "requests.cpu", ""),
				resEnv("MEMORY_LIMIT", "limits.memory", ""), resEnv("MEMORY_REQUEST_MI", "requests.memory", "1Mi"),
				resEnv("EPHEMERAL_LIMIT_GI", "limits.ephemeral-storage", "1Gi"), resEnv("EPHEMERAL_REQUEST_MI", "requests.ephemeral-storage", "1Mi")}},
			want: map[string]string{"CPU_LIMIT": "2", "CPU_LIMIT_M": "1250", "CPU_REQUEST": "1", "MEMORY_LIMIT": "67108864", "MEMORY_REQUEST_MI": "32",
				"EPHEMERAL_LIMIT_GI": "2", "EPHEMERAL_REQUEST_MI": "1024"}},
		{name: "limits default to node allocatable", c: v1.Container{Env: []v1.EnvVar{
			resEnv("CPU_LIMIT", "limits.cpu", ""), resEnv("MEMORY_LIMIT", "limits.memory", "1Gi"), resEnv("EPHEMERAL", "limits.ephemeral-storage", "1Gi"), resEnv("CPU_REQUEST", "requests.cpu", "")}},
			want: map[string]string{"CPU_LIMIT": "4", "MEMORY_LIMIT": "8", "EPHEMERAL": "100", "CPU_REQUEST": "0"}},
		{name: "pod-level limit before allocatable", pod: func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}
		}, c: v1.Container{Env: []v1.EnvVar{resEnv("CPU_LIMIT", "limits.cpu", "")}}, want: map[string]string{"CPU_LIMIT": "2"}},
		{name: "unsupported resource", c: v1.Container{Env: []v1.EnvVar{resEnv("X", "limits.gpu", "")}}, err: "unsupported container resource : limits.gpu"},
		{name: "configMap and secret keys", objects: objs, c: v1.Container{Env: []v1.EnvVar{
			cmEnv("CM", "cfg", "data-1", false), secretEnv("SEC", "sec", "data-1", false),
			cmEnv("OPT_KEY", "cfg", "nope", true), cmEnv("OPT_CM", "gone", "k", true), secretEnv("OPT_SEC", "gone", "k", true)}},
			want: map[string]string{"CM": "value-1", "SEC": "secret-1"}},
		{name: "missing configMap key", objects: objs, c: v1.Container{Env: []v1.EnvVar{cmEnv("X", "cfg", "nope", false)}}, err: "couldn't find key nope in ConfigMap ns/cfg"},
		{name: "missing secret key", objects: objs, c: v1.Container{Env: []v1.EnvVar{secretEnv("X", "sec", "nope", false)}}, err: "couldn't find key nope in Secret ns/sec"},
		{name: "missing configMap", objects: objs, c: v1.Container{Env: []v1.EnvVar{cmEnv("X", "gone", "k", false)}}, err: `configmaps "gone" not found`},
		{name: "missing secret", objects: objs, c: v1.Container{Env: []v1.EnvVar{secretEnv("X", "gone", "k", false)}}, err: `secrets "gone" not found`},
		{name: "no API server", c: v1.Container{Env: []v1.EnvVar{cmEnv("X", "cfg", "k", true)}}, err: "couldn't get configMap ns/cfg, no kubeClient defined"},
		{name: "envFrom with prefix, env overrides", objects: objs, c: v1.Container{
			EnvFrom: []v1.EnvFromSource{
				{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
				{Prefix: "p_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "other"}}},
				{Prefix: "s_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}},
				{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Optional: ptr.To(true)}},
				{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Optional: ptr.To(true)}}},
			Env: []v1.EnvVar{{Name: "data-2", Value: "override $(p_data-1)"}}},
			want:  map[string]string{"data-1": "value-1", "data-2": "override other-1", "p_data-1": "other-1", "s_data-1": "secret-1", "s_bad key": "x"},
			order: []string{"data-1", "data-2", "p_data-1", "s_bad key", "s_data-1"}},
		{name: "envFrom missing, not optional", objects: objs, c: v1.Container{EnvFrom: []v1.EnvFromSource{
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}}}}}, err: `secrets "gone" not found`},
		{name: "service variables last, expandable", service: map[string]string{"SVC_SERVICE_HOST": "10.0.0.1", "A": "svc"},
			c:    v1.Container{Env: []v1.EnvVar{{Name: "A", Value: "mine"}, {Name: "URL", Value: "http://$(SVC_SERVICE_HOST)"}}},
			want: map[string]string{"A": "mine", "URL": "http://10.0.0.1", "SVC_SERVICE_HOST": "10.0.0.1"}, order: []string{"A", "URL", "SVC_SERVICE_HOST"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := base()
			if tc.pod != nil {
				tc.pod(pod)
			}
			c := tc.c
			if c.Name == "" {
				c.Name = "c"
			}
			r := ContainerRequest{Pod: pod, Container: &c, Objects: tc.objects, PodIPs: tc.podIPs, HostIPs: []string{"192.0.2.1"}, ServiceEnv: tc.service}
			kvs, vars, err := environment(n, r)
			if tc.err != "" {
				var ce *ConfigError
				if err == nil || !errors.As(err, &ce) || ce.Message() != tc.err {
					t.Fatalf("err = %v, want a ConfigError with message %q", err, tc.err)
				}
				if !strings.Contains(err.Error(), `pod ns/p container "c"`) {
					t.Errorf("error %q does not name the pod and container", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(kvs) != len(tc.want) || len(vars) != len(tc.want) {
				t.Errorf("got %d variables (%v), want %d (%v)", len(kvs), vars, len(tc.want), tc.want)
			}
			for _, kv := range kvs {
				if want, ok := tc.want[kv.Key]; !ok || string(kv.Value) != want {
					t.Errorf("%s=%q, want %q (set: %v)", kv.Key, kv.Value, want, ok)
				}
			}
			if tc.order != nil {
				var got []string
				for _, kv := range kvs {
					got = append(got, kv.Key)
				}
				if strings.Join(got, " ") != strings.Join(tc.order, " ") {
					t.Errorf("order %v, want %v", got, tc.order)
				}
			}
		})
	}
}

// TestContainerCommandExpansion: command and args expand every variable of
// the final environment, valueFrom ones included.
func TestContainerCommandExpansion(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
	c := &v1.Container{Name: "c", Image: "busybox", Command: []string{"echo", "$(NAME)"}, Args: []string{"$(IP)", "$(MISSING)"},
		Env: []v1.EnvVar{fieldEnv("NAME", "metadata.name"), fieldEnv("IP", "status.podIP")}}
	cc, err := Container(Node{RootDir: t.TempDir()}, ContainerRequest{Pod: pod, Container: c, PodIPs: []string{"10.1.0.7"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(append(cc.Command, cc.Args...), " "); got != "echo p 10.1.0.7 $(MISSING)" {
		t.Errorf("command and args %q", got)
	}
}
