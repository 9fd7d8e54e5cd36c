package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/internal/logbuf"
	"github.com/speclet/speclet/engine/volume"
)

// memAPI is an in-memory volume.API (the real API server backs the
// test/cluster tests).
type memAPI struct {
	mu  sync.Mutex
	cms map[string]*v1.ConfigMap
}

func (a *memAPI) GetConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cm := a.cms[ns+"/"+name]; cm != nil {
		return cm.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (a *memAPI) GetSecret(_ context.Context, ns, name string) (*v1.Secret, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (a *memAPI) CreateToken(context.Context, string, string, *authv1.TokenRequest) (*authv1.TokenRequest, error) {
	return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "", nil)
}

func (a *memAPI) set(ns, name string, data map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cms[ns+"/"+name] = &v1.ConfigMap{Data: data}
}

func volumePod(name string, vols ...v1.Volume) *v1.Pod {
	grace := int64(1)
	var mounts []v1.VolumeMount
	for _, v := range vols {
		mounts = append(mounts, v1.VolumeMount{Name: v.Name, MountPath: "/" + v.Name})
	}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name),
		Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace, HostNetwork: true,
			Volumes:    vols,
			Containers: []v1.Container{{Name: "main", Image: "busybox:latest", ImagePullPolicy: v1.PullIfNotPresent, VolumeMounts: mounts}}}}
}

func (h *scriptHarness) podStatus(name string) *v1.PodStatus {
	for _, p := range h.eng.Pods() {
		if p.Name == name {
			return &p.Status
		}
	}
	return nil
}

func waitingReason(st *v1.PodStatus) string {
	if st == nil || len(st.ContainerStatuses) == 0 || st.ContainerStatuses[0].State.Waiting == nil {
		return ""
	}
	return st.ContainerStatuses[0].State.Waiting.Reason
}

func (h *scriptHarness) sandboxCalls() int { return h.srv.Runtime.Calls("RunPodSandbox") }

// startLogged starts a harness's engine with cfg and returns it with its
// info log.
func startLogged(t *testing.T, cfg Config) (*scriptHarness, *logbuf.Buffer) {
	h := newHarness(t)
	logs := &logbuf.Buffer{}
	h.logw = logs
	h.start(cfg)
	return h, logs
}

// configMapPod is a pod with the configMap cm as its volume conf.
func configMapPod(name, cm string) *v1.Pod {
	return volumePod(name, v1.Volume{Name: "conf", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: cm}}}})
}

// running waits up to d for pod name to be Running.
func (h *scriptHarness) running(d time.Duration, name string) bool {
	return h.waitFor(d, func() bool { st := h.podStatus(name); return st != nil && st.Phase == v1.PodRunning })
}

// volumeFile reads file in the directory of pod's first volume.
func (h *scriptHarness) volumeFile(pod *v1.Pod, file string) (string, error) {
	b, err := os.ReadFile(filepath.Join(volume.HostPath(h.cfg.RootDir, pod, &pod.Spec.Volumes[0]), file))
	return string(b), err
}

// A pod whose configMap does not exist yet stays Pending with its
// container waiting in ContainerCreating, nothing of it in the runtime,
// and a FailedMount event and log line naming the volume and the cause; the sync is
// retried with sync_backoff, and the pod starts once the configMap
// appears, with the configMap's data in its volume.
func TestMissingConfigMapWaitsThenStarts(t *testing.T) {
	synctest.Test(t, testMissingConfigMapWaitsThenStarts)
}

func testMissingConfigMapWaitsThenStarts(t *testing.T) {
	api := &memAPI{cms: map[string]*v1.ConfigMap{}}
	h, logs := startLogged(t, Config{VolumeAPI: api})
	pod := configMapPod("cm", "settings")
	h.send(config.PodUpdate{Op: config.OpAdd, Source: config.SourceFile, Pods: []*v1.Pod{pod}})
	h.step(25*time.Second, time.Second) // two sync_backoff retries
	if got, want := h.recorded.take(), `cm Warning FailedMount: MountVolume.SetUp failed for volume "conf" : configmap "settings" not found`; !strings.HasPrefix(got, want) {
		t.Fatalf("events:\n%s\nwant them to start with %s", got, want)
	}

	st := h.podStatus("cm")
	if st == nil || st.Phase != v1.PodPending || waitingReason(st) != ReasonContainerCreating {
		t.Fatalf("status with a missing configMap: %+v, want Pending with ContainerCreating", st)
	}
	if n := h.sandboxCalls(); n != 0 {
		t.Fatalf("RunPodSandbox called %d times before the volume mounted", n)
	}
	line := `reason=FailedMount pod=default/cm volume=conf type=configMap err="configmap \"settings\" not found"`
	if got := strings.Count(logs.String(), line); got < 2 {
		t.Fatalf("FailedMount logged %d times, want at least 2 (a retry); log:\n%s", got, logs.String())
	}

	api.set("default", "settings", map[string]string{"level": "debug"})
	if !h.running(time.Second, "cm") {
		t.Fatalf("pod not Running once its configMap exists: %+v", h.podStatus("cm"))
	}
	if b, err := h.volumeFile(pod, "level"); err != nil || b != "debug" {
		t.Fatalf("volume file level = %q, %v", b, err)
	}
}

// Without an API client, a configMap volume fails naming its type and the
// missing API; a pod with an unsupported volume type is refused at
// admission naming the volume and the type. Another pod of the same agent
// runs meanwhile.
func TestVolumeErrorsNameTheTypeAndCause(t *testing.T) {
	synctest.Test(t, testVolumeErrorsNameTheTypeAndCause)
}

func testVolumeErrorsNameTheTypeAndCause(t *testing.T) {
	h, logs := startLogged(t, Config{})
	cm := configMapPod("needs-api", "settings")
	pvc := volumePod("pvc", v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}})
	ok := volumePod("ok", v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	h.send(config.PodUpdate{Op: config.OpAdd, Source: config.SourceFile, Pods: []*v1.Pod{cm, pvc, ok}})
	h.step(2*time.Second, time.Second)
	for _, want := range []string{
		`reason=FailedMount pod=default/needs-api volume=conf type=configMap err="configMap \"settings\": no API server client (speclet runs without --kubeconfig)"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s; log:\n%s", want, logs.String())
		}
	}
	if st := h.podStatus("needs-api"); st == nil || waitingReason(st) != ReasonContainerCreating {
		t.Errorf("needs-api: status %+v, want ContainerCreating", st)
	}
	const refused = `Pod was rejected: Pod uses what this node does not support: spec.volumes[0]: volume "data": volume type persistentVolumeClaim is not supported`
	if st := h.podStatus("pvc"); st == nil || st.Phase != v1.PodFailed || st.Reason != "FieldNotSupported" || st.Message != refused {
		t.Errorf("pvc: status %+v, want Failed, FieldNotSupported: %s", st, refused)
	}
	if st := h.podStatus("ok"); st == nil || st.Phase != v1.PodRunning {
		t.Errorf("the pod with an emptyDir is not Running: %+v", st)
	}
	dir := volume.HostPath(h.cfg.RootDir, ok, &ok.Spec.Volumes[0])
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o777 {
		t.Errorf("emptyDir %s: %v %v, want a 0777 directory", dir, fi, err)
	}
}

// A pod removed while speclet was down leaves its medium Memory emptyDir
// mounted; the restarted engine's sweep unmounts it before it removes the
// pod's directory (a RemoveAll through a live mount would fail on the mount
// point and leave the tmpfs behind).
func TestSweepUnmountsOrphanTmpfs(t *testing.T) { synctest.Test(t, testSweepUnmountsOrphanTmpfs) }

func testSweepUnmountsOrphanTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	h := newHarness(t)
	root := filepath.Join(h.dir, "root")
	ghost := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "ghost"}}
	mem := volume.HostPath(root, ghost, &v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}})
	if err := volume.MountTmpfs(mem, 1<<20); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = volume.UnmountAll(volume.PodDir(root, "ghost")) })
	if err := os.WriteFile(filepath.Join(mem, "left"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.start(Config{})
	podDir := volume.PodDir(root, "ghost")
	if !h.waitFor(time.Second, func() bool { _, err := os.Lstat(podDir); return os.IsNotExist(err) }) {
		t.Fatalf("the directory of a pod removed while the agent was down is still there: %s", podDir)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), podDir) {
		t.Fatalf("the orphan tmpfs under %s is still mounted", podDir)
	}
}

// Once a configMap volume mounted, its configMap disappearing does not
// hold the pod back: the pod keeps its last files and its syncs go on (its
// crashing container is restarted), the failed refresh is logged as
// FailedMount; also after the agent restarted.
func TestRefreshFailureKeepsRunningPod(t *testing.T) {
	synctest.Test(t, testRefreshFailureKeepsRunningPod)
}

func testRefreshFailureKeepsRunningPod(t *testing.T) {
	api := &memAPI{cms: map[string]*v1.ConfigMap{}}
	api.set("default", "settings", map[string]string{"level": "info"})
	h, logs := startLogged(t, Config{VolumeAPI: api})
	pod := configMapPod("cm", "settings")
	h.srv.Runtime.OnContainer(sim.Match{Pod: "cm", Name: "main"}, sim.Behavior{Exit: &sim.Exit{After: 20 * time.Second, Code: 1}})
	h.send(config.PodUpdate{Op: config.OpAdd, Source: config.SourceFile, Pods: []*v1.Pod{pod}})
	if !h.running(0, "cm") {
		t.Fatalf("pod not Running: %+v", h.podStatus("cm"))
	}
	api.mu.Lock()
	delete(api.cms, "default/settings")
	api.mu.Unlock()

	h.stop() // the agent restarts while the pod runs
	h.launch(Config{VolumeAPI: api})
	h.send(config.PodUpdate{Op: config.OpAdd, Source: config.SourceFile, Pods: []*v1.Pod{pod}})
	h.step(40*time.Second, time.Second) // the container exits at 20 s, its backoff is 10 s
	if st := h.podStatus("cm"); st == nil || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].RestartCount < 1 {
		t.Fatalf("the crashed container of a pod whose configMap went away was not restarted: %+v", st)
	}
	if !strings.Contains(logs.String(), `reason=FailedMount pod=default/cm volume=conf type=configMap err="configmap \"settings\" not found"`) {
		t.Errorf("the failed refresh was not logged; log:\n%s", logs.String())
	}
	if b, err := h.volumeFile(pod, "level"); err != nil || b != "info" {
		t.Errorf("the pod's last files: level = %q, %v", b, err)
	}
}
