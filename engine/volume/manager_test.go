package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeAPI is an in-memory API for unit tests; the real API server is used
// by test/cluster-backed tests.
type fakeAPI struct {
	cms     map[string]*v1.ConfigMap
	secrets map[string]*v1.Secret
	now     func() time.Time
	tokens  []*authv1.TokenRequest
}

func (f *fakeAPI) GetConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	if cm := f.cms[ns+"/"+name]; cm != nil {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f *fakeAPI) GetSecret(_ context.Context, ns, name string) (*v1.Secret, error) {
	if s := f.secrets[ns+"/"+name]; s != nil {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (f *fakeAPI) CreateToken(_ context.Context, ns, sa string, req *authv1.TokenRequest) (*authv1.TokenRequest, error) {
	tr := req.DeepCopy()
	tr.Status.Token = "token-" + ns + "-" + sa + "-" + string(rune('0'+len(f.tokens)))
	tr.Status.ExpirationTimestamp = metav1.NewTime(f.now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))
	f.tokens = append(f.tokens, tr)
	return tr, nil
}

func ptr[T any](v T) *T { return &v }

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1",
			Labels: map[string]string{"app": "web", "tier": `fr"ont`}, Annotations: map[string]string{"note": "hi"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{
			Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
		}}}},
	}
}

func fileIn(t *testing.T, dir, name string) (string, os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), fi.Mode().Perm()
}

// configMap volumes: every key without items, only the listed keys with
// item paths and modes otherwise, defaultMode for the rest; a missing key
// or configMap fails unless optional; an update reaches the file.
func TestConfigMapVolume(t *testing.T) {
	api := &fakeAPI{cms: map[string]*v1.ConfigMap{"ns/cfg": {Data: map[string]string{"a": "A", "b": "B"}, BinaryData: map[string][]byte{"bin": {0, 1}}}}}
	m := &Manager{Root: t.TempDir(), API: api}
	pod := testPod()
	pod.Spec.Volumes = []v1.Volume{
		{Name: "all", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, DefaultMode: ptr[int32](0o600)}}},
		{Name: "some", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			Items: []v1.KeyToPath{{Key: "a", Path: "dir/a.txt", Mode: ptr[int32](0o400)}, {Key: "b", Path: "b.txt"}}}}},
		{Name: "opt", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Optional: ptr(true)}}},
	}
	if err := m.Setup(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	all := HostPath(m.Root, pod, &pod.Spec.Volumes[0])
	if !strings.HasSuffix(all, "pods/uid-1/volumes/kubernetes.io~configmap/all") {
		t.Errorf("configMap volume at %s", all)
	}
	for name, want := range map[string]string{"a": "A", "b": "B", "bin": "\x00\x01"} {
		if got, mode := fileIn(t, all, name); got != want || mode != 0o600 {
			t.Errorf("all/%s = %q mode %o, want %q mode 600", name, got, mode, want)
		}
	}
	some := HostPath(m.Root, pod, &pod.Spec.Volumes[1])
	if got, mode := fileIn(t, some, "dir/a.txt"); got != "A" || mode != 0o400 {
		t.Errorf("some/dir/a.txt = %q mode %o", got, mode)
	}
	if got, mode := fileIn(t, some, "b.txt"); got != "B" || mode != 0o644 {
		t.Errorf("some/b.txt = %q mode %o", got, mode)
	}
	if _, err := os.Stat(filepath.Join(some, "a")); !os.IsNotExist(err) {
		t.Errorf("a key not listed in items was projected")
	}
	optDir := HostPath(m.Root, pod, &pod.Spec.Volumes[2])
	if _, err := os.Readlink(filepath.Join(optDir, "..data")); err != nil {
		t.Errorf("optional missing configMap: no ..data: %v", err)
	}
	if got := readVolume(t, optDir); len(got) != 0 {
		t.Errorf("optional missing configMap holds %v, want nothing", got)
	}

	api.cms["ns/cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "A2", "b": "B"}}
	if err := m.Setup(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got, _ := fileIn(t, all, "a"); got != "A2" {
		t.Errorf("after update all/a = %q", got)
	}
	if _, err := os.Stat(filepath.Join(all, "bin")); !os.IsNotExist(err) {
		t.Errorf("a key removed from the configMap is still a file")
	}

	bad := testPod()
	bad.Spec.Volumes = []v1.Volume{
		{Name: "missing", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}}}},
		{Name: "nokey", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Items: []v1.KeyToPath{{Key: "zzz", Path: "z"}}}}},
	}
	err := m.Setup(context.Background(), bad)
	for _, want := range []string{`volume "missing" (configMap): configmap "absent" not found`, `volume "nokey" (configMap): configmap "cfg" references non-existent configmap key: zzz`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Setup error %v, want it to contain %q", err, want)
		}
	}
}

// Without an API client, the API-backed kinds fail naming the kind and the
// missing API; an unsupported kind fails naming it.
func TestVolumeWithoutAPI(t *testing.T) {
	m := &Manager{Root: t.TempDir()}
	pod := testPod()
	pod.Spec.Volumes = []v1.Volume{
		{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "pvc", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
	}
	err := m.Setup(context.Background(), pod)
	if !errors.Is(err, ErrNoAPI) {
		t.Errorf("error %v does not wrap ErrNoAPI", err)
	}
	for _, want := range []string{`volume "cm" (configMap): configMap "cfg": no API server client (speclet runs without --kubeconfig)`, `volume "pvc" (persistentVolumeClaim): volume type "persistentVolumeClaim" is not supported`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Setup error %v, want it to contain %q", err, want)
		}
	}
}

// downwardAPI: metadata fields, labels and annotations in kubelet's
// format, resource fields with divisors and the node's allocatable for a
// missing limit.
func TestDownwardAPIFiles(t *testing.T) {
	pod := testPod()
	node := Node{CPU: resource.MustParse("2"), Memory: resource.MustParse("4Gi")}
	items := []v1.DownwardAPIVolumeFile{
		{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
		{Path: "uid", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.uid"}},
		{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}, Mode: ptr[int32](0o400)},
		{Path: "annotations", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
		{Path: "app", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}},
		{Path: "mem_limit_mi", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
		{Path: "cpu_request_m", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "main", Resource: "requests.cpu", Divisor: resource.MustParse("1m")}},
		{Path: "cpu_request", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "main", Resource: "requests.cpu"}},
		{Path: "cpu_limit", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.cpu"}},
	}
	files, err := downwardFiles(pod, node, items, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"name": "web", "namespace": "ns", "uid": "uid-1",
		"labels":      "app=\"web\"\ntier=\"fr\\\"ont\"",
		"annotations": `note="hi"`, "app": "web",
		"mem_limit_mi": "64", "cpu_request_m": "250", "cpu_request": "1", "cpu_limit": "2",
	}
	for p, w := range want {
		if got := string(files[p].Data); got != w {
			t.Errorf("%s = %q, want %q", p, got, w)
		}
	}
	if files["labels"].Mode != 0o400 || files["name"].Mode != DefaultMode {
		t.Errorf("modes: labels %o, name %o", files["labels"].Mode, files["name"].Mode)
	}
	if _, err := downwardFiles(pod, node, []v1.DownwardAPIVolumeFile{{Path: "x", FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}, nil); err == nil {
		t.Errorf("spec.nodeName accepted in a downwardAPI volume")
	}
}

// A projected token is requested once, bound to the pod, and again once
// 80% of its lifetime has passed.
func TestServiceAccountTokenRotation(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	api := &fakeAPI{now: func() time.Time { return now }}
	m := &Manager{Root: t.TempDir(), API: api, Now: func() time.Time { return now }}
	pod := testPod()
	pod.Spec.ServiceAccountName = "robot"
	p := &v1.ServiceAccountTokenProjection{Path: "token", Audience: "api", ExpirationSeconds: ptr[int64](1000)}
	m.tokens.now = m.now
	get := func() string {
		tok, err := m.tokens.get(context.Background(), api, pod, p)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	first := get()
	req := api.tokens[0]
	if req.Spec.BoundObjectRef == nil || req.Spec.BoundObjectRef.UID != pod.UID || req.Spec.Audiences[0] != "api" || *req.Spec.ExpirationSeconds != 1000 {
		t.Errorf("token request %+v", req.Spec)
	}
	now = now.Add(799 * time.Second)
	if get() != first || len(api.tokens) != 1 {
		t.Errorf("token requested again before 80%% of its lifetime")
	}
	now = now.Add(2 * time.Second)
	if get() == first || len(api.tokens) != 2 {
		t.Errorf("token not rotated after 80%% of its lifetime")
	}
	m.tokens.forget(pod.UID)
	get()
	if len(api.tokens) != 3 {
		t.Errorf("a forgotten pod's token was reused")
	}
}

func TestType(t *testing.T) {
	for want, src := range map[string]v1.VolumeSource{
		"emptyDir": {EmptyDir: &v1.EmptyDirVolumeSource{}}, "hostPath": {HostPath: &v1.HostPathVolumeSource{}},
		"nfs": {NFS: &v1.NFSVolumeSource{}}, "": {},
	} {
		if got := Type(&src); got != want {
			t.Errorf("Type = %q, want %q", got, want)
		}
	}
}
