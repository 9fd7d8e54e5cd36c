package volume

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// TestUnmountAll: the mounts at and below a directory go, nested ones
// first; a directory that does not exist has nothing mounted and is no
// error.
func TestUnmountAll(t *testing.T) {
	if err := UnmountAll(filepath.Join(t.TempDir(), "gone")); err != nil {
		t.Errorf("UnmountAll of a missing directory = %v, want nil", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	outer := filepath.Join(dir, "volumes", "a")
	if err := os.MkdirAll(outer, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", outer, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	inner := filepath.Join(outer, "b")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", inner, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(inner, unix.MNT_DETACH); unix.Unmount(outer, unix.MNT_DETACH) })
	if err := UnmountAll(filepath.Join(dir, "volumes")); err != nil {
		t.Fatalf("UnmountAll: %v", err)
	}
	mps, err := mountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(mps) != 0 {
		t.Errorf("mounts left under %s: %v", dir, mps)
	}
}

// TestEmptyDirModes: the root of each volume has kubelet's mode (its
// pkg/volume/emptydir setupDir and setupTmpfs, then SetVolumeOwnership): a
// disk emptyDir 0777, a medium Memory one the tmpfs's own 1777 (sticky),
// and a secret's tmpfs 1777 too; fsGroup adds setgid (2777, 3777). A
// second Setup leaves the modes as they are. A hugepages medium is refused
// naming the medium.
func TestEmptyDirModes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs and chown to another group need root")
	}
	api := &fakeAPI{secrets: map[string]*v1.Secret{"ns/creds": {Data: map[string][]byte{"pw": []byte("x")}}}}
	for _, tc := range []struct {
		name                 string
		fsGroup              *int64
		disk, memory, secret os.FileMode
	}{
		{name: "no fsGroup", fsGroup: nil, disk: 0o777, memory: os.ModeSticky | 0o777, secret: os.ModeSticky | 0o777},
		{name: "fsGroup 4321", fsGroup: ptr(int64(4321)), disk: os.ModeSetgid | 0o777, memory: os.ModeSticky | os.ModeSetgid | 0o777, secret: os.ModeSticky | os.ModeSetgid | 0o777},
	} {
		m := &Manager{Root: t.TempDir(), API: api}
		pod := testPod()
		pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: tc.fsGroup}
		pod.Spec.Volumes = []v1.Volume{
			{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
			{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds"}}},
		}
		t.Cleanup(func() {
			if err := m.TearDown(pod.UID); err != nil {
				t.Error(err)
			}
		})
		for round := 1; round <= 2; round++ {
			if err := m.Setup(context.Background(), pod); err != nil {
				t.Fatalf("%s, Setup %d: %v", tc.name, round, err)
			}
			for i, want := range []os.FileMode{tc.disk, tc.memory, tc.secret} {
				dir := HostPath(m.Root, pod, &pod.Spec.Volumes[i])
				fi, err := os.Stat(dir)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode() &^ os.ModeDir; got != want {
					t.Errorf("%s, Setup %d: volume %s mode %v, want %v", tc.name, round, pod.Spec.Volumes[i].Name, got, want)
				}
			}
		}
	}

	m := &Manager{Root: t.TempDir()}
	pod := testPod()
	pod.Spec.Volumes = []v1.Volume{{Name: "huge", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}}}}
	if err := m.Setup(context.Background(), pod); err == nil || !strings.Contains(err.Error(), `volume "huge" (emptyDir): emptyDir medium "HugePages" is not supported`) {
		t.Errorf("Setup of a hugepages emptyDir: %v, want it refused naming the medium", err)
	}
}
