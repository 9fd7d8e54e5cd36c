package containerdtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/volume"
)

// TestContainerdVolumes runs a busybox pod on a real containerd whose
// container reports what it sees in its volumes into a hostPath directory:
// an emptyDir with medium Memory is a tmpfs of its sizeLimit in the
// container's /proc/mounts, mode 1777 (kubelet's, sticky), a disk emptyDir
// mode 777; hostPath types (DirectoryOrCreate created,
// File, CharDevice); downwardAPI files; a subPath of an emptyDir; a
// readOnly mount refuses writes. After the pod is removed, the tmpfs is
// unmounted and the pod's directory is gone.
func TestContainerdVolumes(t *testing.T) {
	c, ctx := containerdFor(t, 3*time.Minute)
	host := t.TempDir()
	out := filepath.Join(host, "out") // DirectoryOrCreate makes it
	hostFile := filepath.Join(host, "motd")
	if err := os.WriteFile(hostFile, []byte("hello from the node"), 0o644); err != nil {
		t.Fatal(err)
	}
	typ := func(t v1.HostPathType) *v1.HostPathType { return &t }
	size := resource.MustParse("16Mi")
	grace := int64(1)
	script := strings.Join([]string{
		`grep " /mem " /proc/mounts > /out/mem`,
		`stat -c %a /mem > /out/mem-mode; stat -c %a /ro > /out/disk-mode`,
		`echo data > /mem/f && cat /mem/f > /out/mem-write`,
		`cat /hp-file > /out/hp-file`,
		`test -c /hp-null && echo char > /out/hp-null`,
		`cat /info/name > /out/name; cat /info/labels > /out/labels; cat /info/mem > /out/memlimit`,
		`echo via-subpath > /sub/f`,
		`if touch /ro/x 2>/dev/null; then echo writable > /out/ro; else echo read-only > /out/ro; fi`,
		`ls -a /info > /out/info-ls`,
	}, "\n")
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "vols", Namespace: "default", UID: "vols-uid", Labels: map[string]string{"app": "vols"},
			Annotations: map[string]string{config.AnnotationSource: config.SourceFile}},
		Spec: v1.PodSpec{HostNetwork: true, RestartPolicy: v1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
			Volumes: []v1.Volume{
				{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &size}}},
				{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "out", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: out, Type: typ(v1.HostPathDirectoryOrCreate)}}},
				{Name: "hp-file", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostFile, Type: typ(v1.HostPathFile)}}},
				{Name: "hp-null", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/dev/null", Type: typ(v1.HostPathCharDev)}}},
				{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
					{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
					{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
					{Path: "mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
				}}}},
			},
			Containers: []v1.Container{{Name: "main", Image: c.ImageRef("busybox:latest"), ImagePullPolicy: v1.PullIfNotPresent,
				Command:   []string{"/bin/sh", "-c", script},
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}},
				VolumeMounts: []v1.VolumeMount{
					{Name: "mem", MountPath: "/mem"},
					{Name: "out", MountPath: "/out"},
					{Name: "hp-file", MountPath: "/hp-file", ReadOnly: true},
					{Name: "hp-null", MountPath: "/hp-null"},
					{Name: "info", MountPath: "/info"},
					{Name: "disk", MountPath: "/sub", SubPath: "nested/dir"},
					{Name: "disk", MountPath: "/ro", ReadOnly: true},
				}}}},
	}
	root := filepath.Join(t.TempDir(), "root")
	_, e, updates := startPods(ctx, t, c, engine.Config{RootDir: root}, pod)
	waitPhase(t, ctx, e, "vols", v1.PodSucceeded)

	read := func(name string) string { return strings.TrimSpace(written(t, out, name)) }
	if m := read("mem"); !strings.HasPrefix(m, "tmpfs /mem tmpfs ") || !strings.Contains(m, "size=16384k") {
		t.Errorf("/mem in the container's /proc/mounts: %q, want a tmpfs with size=16384k", m)
	}
	for name, want := range map[string]string{
		"mem-write": "data", "hp-file": "hello from the node", "hp-null": "char",
		"name": "vols", "labels": `app="vols"`, "memlimit": "32", "ro": "read-only",
		"mem-mode": "1777", "disk-mode": "777",
	} {
		if got := read(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if ls := read("info-ls"); !strings.Contains(ls, "..data") {
		t.Errorf("downwardAPI volume lacks the ..data symlink: %q", ls)
	}
	disk := volume.HostPath(root, pod, &pod.Spec.Volumes[1])
	if b, err := os.ReadFile(filepath.Join(disk, "nested", "dir", "f")); err != nil || string(b) != "via-subpath\n" {
		t.Errorf("subPath write reached %q, %v", b, err)
	}
	memDir := volume.HostPath(root, pod, &pod.Spec.Volumes[0])
	if mnt, err := volume.IsMountPoint(memDir); err != nil || !mnt {
		t.Errorf("medium Memory emptyDir %s is not a mount point on the node (%v)", memDir, err)
	}

	removePods(updates, pod)
	podDir := volume.PodDir(root, pod.UID)
	waitFor(t, ctx, "the pod's directory removed", gone(podDir), e)
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), podDir) {
		t.Errorf("a mount under %s is left after the pod was removed", podDir)
	}
}
