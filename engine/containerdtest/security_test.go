package containerdtest

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/engine"
)

// TestContainerdSecurityContext runs pods with a security context on
// containerd: runAsUser and runAsGroup 1000 make the process uid and gid
// 1000 (it writes `id -u` and `id -g` to a hostPath directory);
// fsGroup and supplementalGroups add groups, and fsGroup owns the pod's
// downwardAPI and emptyDir volumes; allowPrivilegeEscalation
// false sets no_new_privs (unset does not); capabilities drop and add;
// privileged gives CAP_SYS_ADMIN, which a plain container lacks;
// a pod sysctl (kernel.shm_rmid_forced, in the pod's IPC namespace) is
// set; readOnlyRootFilesystem makes a write to / fail (while the hostPath mount
// stays writable); runAsNonRoot with runAsUser 0, and with an image that
// runs as root, is refused before the runtime creates anything, with
// CreateContainerConfigError and kubelet's message. (Before the security
// context was translated, the first two ran as root with a writable root
// and the last two ran.)
func TestContainerdSecurityContext(t *testing.T) {
	c, ctx := containerdFor(t, 3*time.Minute)
	out := t.TempDir()
	if err := os.Chmod(out, 0o777); err != nil { // writable by uid 1000
		t.Fatal(err)
	}
	mk := func(name, script string, sc *v1.SecurityContext) *v1.Pod {
		p := writesTo(shPod(c, name, v1.RestartPolicyNever, 1, script), out, nil)
		p.Spec.Containers[0].SecurityContext = sc
		return p
	}
	status := func(file string) string { // a /proc/self/status line's value, to a file
		return `grep ^` + file + `: /proc/self/status | cut -f2 > /out/` + file + `.$POD`
	}
	ids := mk("ids", `id -u > /out/uid; id -g > /out/gid; id -G > /out/groups; POD=ids; `+status("NoNewPrivs"),
		&v1.SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000)})
	ids.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](4000), SupplementalGroups: []int64{5000}}
	// fsGroup owns the pod's volumes: a downwardAPI file of mode 0400 is
	// group readable for uid 1000, an emptyDir is setgid to the group.
	ids.Spec.Volumes = append(ids.Spec.Volumes,
		v1.Volume{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{DefaultMode: ptr.To[int32](0o400),
			Items: []v1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	ids.Spec.Containers[0].VolumeMounts = append(ids.Spec.Containers[0].VolumeMounts,
		v1.VolumeMount{Name: "info", MountPath: "/info"}, v1.VolumeMount{Name: "scratch", MountPath: "/scratch"})
	ids.Spec.Containers[0].Command[2] += `; cat /info/name > /out/info-name; stat -L -c '%g %a' /info/name > /out/info-mode; stat -c '%g %a' /scratch > /out/scratch`
	nnp := mk("nnp", `POD=nnp; `+status("NoNewPrivs"), &v1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)})
	caps := mk("caps", `POD=caps; `+status("CapEff"), &v1.SecurityContext{Capabilities: &v1.Capabilities{
		Drop: []v1.Capability{"ALL"}, Add: []v1.Capability{"CHOWN", "KILL"}}})
	priv := mk("priv", `POD=priv; `+status("CapEff"), &v1.SecurityContext{Privileged: ptr.To(true)})
	plain := mk("plain", `POD=plain; `+status("CapEff"), nil)
	sysctl := mk("sysctl", `cat /proc/sys/kernel/shm_rmid_forced > /out/shm_rmid_forced`, nil)
	sysctl.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}}}
	rofs := mk("rofs", `if echo x > /probe; then echo writable > /out/root; else echo read-only > /out/root; fi`,
		&v1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)})
	rootUID := mk("root-uid", `true`, &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)})
	rootImage := mk("root-image", `true`, &v1.SecurityContext{RunAsNonRoot: ptr.To(true)})
	pods := []*v1.Pod{ids, rofs, rootUID, rootImage, nnp, caps, priv, plain, sysctl}
	events := &podEvents{}
	rt, e, updates := startPods(ctx, t, c, engine.Config{Events: events}, pods...)

	for _, name := range []string{"ids", "rofs", "nnp", "caps", "priv", "plain", "sysctl"} {
		waitPhase(t, ctx, e, name, v1.PodSucceeded)
	}
	read := func(name string) string { return readFile(t, filepath.Join(out, name)) }
	if uid, gid := read("uid"), read("gid"); uid != "1000" || gid != "1000" {
		t.Errorf("runAsUser/runAsGroup 1000: container ran with uid %s gid %s", uid, gid)
	}
	for file, want := range map[string]string{"info-name": "ids", "info-mode": "4000 440", "scratch": "4000 2777"} {
		if got := read(file); got != want {
			t.Errorf("fsGroup 4000 on the volumes: %s = %q, want %q", file, got, want)
		}
	}
	if got := read("groups"); got != "1000 4000 5000" {
		t.Errorf("fsGroup 4000, supplementalGroups 5000: groups %q, want 1000 4000 5000", got)
	}
	if got, want := read("NoNewPrivs.ids"), "0"; got != want {
		t.Errorf("allowPrivilegeEscalation unset: NoNewPrivs %s, want %s", got, want)
	}
	if got, want := read("NoNewPrivs.nnp"), "1"; got != want {
		t.Errorf("allowPrivilegeEscalation false: NoNewPrivs %s, want %s", got, want)
	}
	// CHOWN is capability 0 and KILL 5.
	if got, want := read("CapEff.caps"), "0000000000000021"; got != want {
		t.Errorf("capabilities drop ALL add CHOWN, KILL: CapEff %s, want %s", got, want)
	}
	capEff := func(pod string) uint64 {
		v, err := strconv.ParseUint(read("CapEff."+pod), 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const sysAdmin = 1 << 21
	if capEff("priv")&sysAdmin == 0 || capEff("plain")&sysAdmin != 0 {
		t.Errorf("privileged: CapEff %x (want CAP_SYS_ADMIN), unprivileged %x (want none)", capEff("priv"), capEff("plain"))
	}
	if got := read("shm_rmid_forced"); got != "1" {
		t.Errorf("sysctl kernel.shm_rmid_forced=1: the pod sees %s", got)
	}
	if got := read("root"); got != "read-only" {
		t.Errorf("readOnlyRootFilesystem: root file system is %s", got)
	}
	for _, tc := range []struct{ pod, message string }{
		{"root-uid", `container's runAsUser breaks non-root policy (pod: "root-uid_default(root-uid-uid)", container: main)`},
		{"root-image", `container has runAsNonRoot and image will run as root (pod: "root-image_default(root-image-uid)", container: main)`},
	} {
		waitFor(t, ctx, tc.pod+" waiting with CreateContainerConfigError", func() bool {
			w := mainStatus(e, tc.pod).State.Waiting
			return w != nil && w.Reason == engine.ReasonCreateContainerConfig && w.Message == tc.message
		}, e)
		if !events.has("default/"+tc.pod, "Failed: Error: "+tc.message) {
			t.Errorf("%s: no Failed event with kubelet's message; events %q", tc.pod, events.got["default/"+tc.pod])
		}
	}
	cs, err := rt.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ctr := range cs {
		if n := ctr.Labels[engine.LabelPodName]; n == "root-uid" || n == "root-image" {
			t.Errorf("pod %s: the runtime has a container although runAsNonRoot refused it", n)
		}
	}

	removePods(updates, pods...)
	waitFor(t, ctx, "pods removed", func() bool { return len(e.Pods()) == 0 }, e)
}
