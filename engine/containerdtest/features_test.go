package containerdtest

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine"
)

// TestContainerdRecursiveReadOnly mounts a host directory with a tmpfs
// mounted under it (sub) read-only into pods, each trying to write into
// the submount: without recursiveReadOnly the submount stays writable
// (the bind is recursive, its read-only flag is not). On containerd 2.x,
// whose default handler reports recursive read-only mounts, Enabled and
// IfPossible make the write fail with EROFS ("Read-only file system") and
// the status's volumeMounts say Enabled. On containerd 1.6, which reports
// no handlers, IfPossible is a plain read-only mount (the submount is
// writable, volumeMounts say Disabled) and Enabled is kubelet's
// CreateContainerConfigError with its message, no container made.
func TestContainerdRecursiveReadOnly(t *testing.T) {
	c, ctx := containerdFor(t, 2*time.Minute)
	host, out := t.TempDir(), t.TempDir()
	sub := filepath.Join(host, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount a tmpfs under the host directory: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(sub, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", sub, err)
		}
	})
	mk := func(name string, mode *v1.RecursiveReadOnlyMode) *v1.Pod {
		p := writesTo(shPod(c, name, v1.RestartPolicyNever, 1,
			`if touch /ro/sub/`+name+` 2>/out/`+name+`.err; then echo writable; else echo read-only; fi > /out/`+name), out, nil)
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: "host", MountPath: "/ro", ReadOnly: true, RecursiveReadOnly: mode})
		return p
	}
	plain := mk("plain", nil)
	enabled := mk("enabled", ptr.To(v1.RecursiveReadOnlyEnabled))
	possible := mk("possible", ptr.To(v1.RecursiveReadOnlyIfPossible))
	pods := []*v1.Pod{plain, enabled, possible}
	events := &podEvents{}
	rt, e, updates := startPods(ctx, t, c, engine.Config{Events: events}, pods...)
	v2 := c.Runtime == harness.Containerd2
	waitFor(t, ctx, "the runtime's features", func() bool { return e.RuntimeFeatures() != nil }, e)
	if got := e.RuntimeFeatures().Handler("").RecursiveReadOnlyMounts; got != v2 {
		t.Fatalf("%s: the default handler's recursive read-only mounts %v, want %v", c.Runtime, got, v2)
	}
	// status.volumeMounts of the /ro mount.
	roStatus := func(name string) *v1.RecursiveReadOnlyMode {
		for _, m := range mainStatus(e, name).VolumeMounts {
			if m.MountPath == "/ro" {
				return m.RecursiveReadOnly
			}
		}
		t.Errorf("%s: no volumeMounts status of /ro: %+v", name, mainStatus(e, name).VolumeMounts)
		return nil
	}
	wants := map[string]string{"plain": "writable", "possible": "writable"}
	if v2 {
		wants = map[string]string{"plain": "writable", "possible": "read-only", "enabled": "read-only"}
	}
	for name, want := range wants {
		waitPhase(t, ctx, e, name, v1.PodSucceeded)
		if got := readFile(t, filepath.Join(out, name)); got != want {
			t.Errorf("%s: the submount is %s inside, want %s", name, got, want)
		}
		if want == "read-only" {
			if msg := readFile(t, filepath.Join(out, name+".err")); !strings.Contains(msg, "Read-only file system") {
				t.Errorf("%s: the write failed with %q, want EROFS", name, msg)
			}
		}
		mode := v1.RecursiveReadOnlyDisabled
		if want == "read-only" {
			mode = v1.RecursiveReadOnlyEnabled
		}
		if got := roStatus(name); got == nil || *got != mode {
			t.Errorf("%s: volumeMounts recursiveReadOnly %v, want %s", name, got, mode)
		}
	}
	if !v2 {
		const msg = `failed to resolve recursive read-only mode: volume "host" requested recursive read-only mode, but it is not supported by the runtime`
		waitFor(t, ctx, "enabled waiting with CreateContainerConfigError", func() bool {
			w := mainStatus(e, "enabled").State.Waiting
			return w != nil && w.Reason == engine.ReasonCreateContainerConfig && w.Message == msg
		}, e)
		if !events.has("default/enabled", "Failed: Error: "+msg) {
			t.Errorf("enabled: no Failed event with kubelet's message; events %q", events.got["default/enabled"])
		}
		cs, err := rt.ListContainers(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, ctr := range cs {
			if ctr.Labels[engine.LabelPodName] == "enabled" {
				t.Error("enabled: the runtime has a container although its mount was refused")
			}
		}
	}
	removePods(updates, pods...)
	waitFor(t, ctx, "pods removed", func() bool { return len(e.Pods()) == 0 }, e)
}

// TestContainerdSupplementalGroupsPolicy runs busybox's root (whose
// /etc/group puts it in more groups than its own, wheel among them) with
// supplementalGroups 5000, under Merge and Strict. Merge keeps the image's
// groups (`id -G` lists more than 0 and 5000). On containerd 2.x, whose
// Status reports the policy, Strict drops them (`id -G` is 0 5000) and
// both statuses show the user the runtime reports (uid 0, gid 0, and with
// the gid the groups `id -G` printed). On containerd 1.6 Strict is refused at
// admission with kubelet's SupplementalGroupsPolicyNotSupported and its
// message, and no user is shown.
func TestContainerdSupplementalGroupsPolicy(t *testing.T) {
	c, ctx := containerdFor(t, 2*time.Minute)
	out := t.TempDir()
	mk := func(name string, policy v1.SupplementalGroupsPolicy) *v1.Pod {
		p := writesTo(shPod(c, name, v1.RestartPolicyNever, 1, `id -G > /out/`+name), out, nil)
		p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroups: []int64{5000}, SupplementalGroupsPolicy: &policy}
		return p
	}
	merge, strict := mk("merge", v1.SupplementalGroupsPolicyMerge), mk("strict", v1.SupplementalGroupsPolicyStrict)
	_, e, updates := startPods(ctx, t, c, engine.Config{}, merge, strict)
	v2 := c.Runtime == harness.Containerd2
	waitFor(t, ctx, "the runtime's features", func() bool { return e.RuntimeFeatures() != nil }, e)
	if got := e.RuntimeFeatures().SupportsSupplementalGroupsPolicy(); got != v2 {
		t.Fatalf("%s: supplemental groups policy supported %v, want %v", c.Runtime, got, v2)
	}
	groups := func(name string) []int64 {
		var gs []int64
		for _, f := range strings.Fields(readFile(t, filepath.Join(out, name))) {
			g, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("%s: id -G: %v", name, err)
			}
			gs = append(gs, g)
		}
		slices.Sort(gs)
		return gs
	}
	// user checks the user the status shows against the groups the
	// process had.
	user := func(name string, gs []int64) {
		u := mainStatus(e, name).User
		if !v2 {
			if u != nil {
				t.Errorf("%s: user %+v from a runtime that reports none", name, u)
			}
			return
		}
		if u == nil || u.Linux == nil {
			t.Errorf("%s: no user in the status", name)
			return
		}
		// The runtime's groups, with the primary group `id -G` lists too
		// (containerd 2.x lists it under Merge, not under Strict).
		got := slices.Compact(slices.Sorted(slices.Values(append([]int64{u.Linux.GID}, u.Linux.SupplementalGroups...))))
		if u.Linux.UID != 0 || u.Linux.GID != 0 || !slices.Equal(got, gs) {
			t.Errorf("%s: user %+v, want uid 0 gid 0 groups %v", name, u.Linux, gs)
		}
	}

	waitPhase(t, ctx, e, "merge", v1.PodSucceeded)
	mg := groups("merge")
	if len(mg) <= 2 || !slices.Contains(mg, 0) || !slices.Contains(mg, 5000) {
		t.Errorf("Merge: groups %v, want 0, 5000 and the image's", mg)
	}
	user("merge", mg)
	if v2 {
		waitPhase(t, ctx, e, "strict", v1.PodSucceeded)
		if sg := groups("strict"); !slices.Equal(sg, []int64{0, 5000}) {
			t.Errorf("Strict: groups %v, want [0 5000] (none of the image's)", sg)
		}
		user("strict", []int64{0, 5000})
	} else {
		waitPhase(t, ctx, e, "strict", v1.PodFailed)
		p := podNamed(e, "strict")
		if p.Status.Reason != "SupplementalGroupsPolicyNotSupported" || p.Status.Message != "Pod was rejected: SupplementalGroupsPolicy=Strict is not supported in this node" {
			t.Errorf("Strict: %s %q, want kubelet's refusal", p.Status.Reason, p.Status.Message)
		}
	}
	removePods(updates, merge, strict)
	waitFor(t, ctx, "pods removed", func() bool { return len(e.Pods()) == 0 }, e)
}
