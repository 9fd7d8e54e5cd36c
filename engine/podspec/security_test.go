package podspec

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

func securityPod(psc *v1.PodSecurityContext, csc *v1.SecurityContext) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec: v1.PodSpec{
			SecurityContext: psc,
			Containers:      []v1.Container{{Name: "c", Image: "busybox", SecurityContext: csc}},
		},
	}
}

// TestSecurityContainer: each field of the pod's and the container's
// security context reaches the container's CRI security context, the
// container's winning; what is not set has kubelet's default.
func TestSecurityContainer(t *testing.T) {
	unconfined := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	runtimeDefault := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	// base is the context of a container that sets nothing.
	base := func() *runtimeapi.LinuxContainerSecurityContext {
		return &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: ns,
			Seccomp:          unconfined,
			MaskedPaths:      defaultMaskedPaths(),
			ReadonlyPaths:    defaultReadonlyPaths,
		}
	}
	for _, tc := range []struct {
		name string
		psc  *v1.PodSecurityContext
		csc  *v1.SecurityContext
		img  ImageUser
		want func(*runtimeapi.LinuxContainerSecurityContext)
	}{
		{"nothing set", nil, nil, ImageUser{}, func(*runtimeapi.LinuxContainerSecurityContext) {}},
		{"pod runAsUser and runAsGroup", &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](2000)}, nil, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) {
				s.RunAsUser = &runtimeapi.Int64Value{Value: 1000}
				s.RunAsGroup = &runtimeapi.Int64Value{Value: 2000}
			}},
		{"container runAsUser wins", &v1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](2000)},
			&v1.SecurityContext{RunAsUser: ptr.To[int64](3000)}, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) {
				s.RunAsUser = &runtimeapi.Int64Value{Value: 3000}
				s.RunAsGroup = &runtimeapi.Int64Value{Value: 2000}
			}},
		{"container runAsGroup wins", &v1.PodSecurityContext{RunAsGroup: ptr.To[int64](2000)},
			&v1.SecurityContext{RunAsGroup: ptr.To[int64](4000)}, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) { s.RunAsGroup = &runtimeapi.Int64Value{Value: 4000} }},
		{"image uid when none set", nil, nil, ImageUser{UID: ptr.To[int64](1234)},
			func(s *runtimeapi.LinuxContainerSecurityContext) { s.RunAsUser = &runtimeapi.Int64Value{Value: 1234} }},
		{"image user name when none set", nil, nil, ImageUser{Username: "nobody"},
			func(s *runtimeapi.LinuxContainerSecurityContext) { s.RunAsUsername = "nobody" }},
		{"runAsUser over image user", nil, &v1.SecurityContext{RunAsUser: ptr.To[int64](5)}, ImageUser{Username: "nobody"},
			func(s *runtimeapi.LinuxContainerSecurityContext) { s.RunAsUser = &runtimeapi.Int64Value{Value: 5} }},
		{"fsGroup then supplementalGroups", &v1.PodSecurityContext{FSGroup: ptr.To[int64](7), SupplementalGroups: []int64{8, 9}}, nil, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) { s.SupplementalGroups = []int64{7, 8, 9} }},
		{"supplementalGroupsPolicy Merge", &v1.PodSecurityContext{SupplementalGroupsPolicy: ptr.To(v1.SupplementalGroupsPolicyMerge)}, nil, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) {
				s.SupplementalGroupsPolicy = runtimeapi.SupplementalGroupsPolicy_Merge
			}},
		{"readOnlyRootFilesystem", nil, &v1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)}, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) { s.ReadonlyRootfs = true }},
		{"readOnlyRootFilesystem false", nil, &v1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(false)}, ImageUser{},
			func(*runtimeapi.LinuxContainerSecurityContext) {}},
		{"privileged", nil, &v1.SecurityContext{Privileged: ptr.To(true)}, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) { s.Privileged = true }},
		{"capabilities", nil, &v1.SecurityContext{Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}}}, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) {
				s.Capabilities = &runtimeapi.Capability{AddCapabilities: []string{"NET_ADMIN"}, DropCapabilities: []string{"ALL"}}
			}},
		{"allowPrivilegeEscalation false", nil, &v1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false)}, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) { s.NoNewPrivs = true }},
		{"allowPrivilegeEscalation true", nil, &v1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)}, ImageUser{},
			func(*runtimeapi.LinuxContainerSecurityContext) {}},
		{"allowPrivilegeEscalation unset, non-root", nil, &v1.SecurityContext{RunAsUser: ptr.To[int64](1000)}, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) { s.RunAsUser = &runtimeapi.Int64Value{Value: 1000} }},
		{"pod seccomp RuntimeDefault", &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}, nil, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) { s.Seccomp = runtimeDefault }},
		{"container seccomp wins", &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}},
			&v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}}, ImageUser{},
			func(*runtimeapi.LinuxContainerSecurityContext) {}},
		{"seccomp Localhost", nil, &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("profiles/audit.json")}}, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) {
				s.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/var/lib/speclet/seccomp/profiles/audit.json"}
			}},
		{"pod seLinuxOptions", &v1.PodSecurityContext{SELinuxOptions: &v1.SELinuxOptions{User: "u", Role: "r", Type: "t", Level: "s0:c1"}}, nil, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) {
				s.SelinuxOptions = &runtimeapi.SELinuxOption{User: "u", Role: "r", Type: "t", Level: "s0:c1"}
			}},
		{"container seLinuxOptions win", &v1.PodSecurityContext{SELinuxOptions: &v1.SELinuxOptions{Level: "s0:c1"}},
			&v1.SecurityContext{SELinuxOptions: &v1.SELinuxOptions{Level: "s0:c2"}}, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) {
				s.SelinuxOptions = &runtimeapi.SELinuxOption{Level: "s0:c2"}
			}},
		{"procMount Unmasked", nil, &v1.SecurityContext{ProcMount: ptr.To(v1.UnmaskedProcMount)}, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) {
				s.MaskedPaths, s.ReadonlyPaths = []string{}, []string{}
			}},
		{"procMount Default", nil, &v1.SecurityContext{ProcMount: ptr.To(v1.DefaultProcMount)}, ImageUser{},
			func(*runtimeapi.LinuxContainerSecurityContext) {}},
		{"runAsNonRoot with a non-root user", nil, &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)}, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) { s.RunAsUser = &runtimeapi.Int64Value{Value: 1000} }},
		{"runAsNonRoot with a non-root image", &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, nil, ImageUser{UID: ptr.To[int64](1234)},
			func(s *runtimeapi.LinuxContainerSecurityContext) { s.RunAsUser = &runtimeapi.Int64Value{Value: 1234} }},
		{"runAsNonRoot false with root", nil, &v1.SecurityContext{RunAsNonRoot: ptr.To(false), RunAsUser: ptr.To[int64](0)}, ImageUser{},
			func(s *runtimeapi.LinuxContainerSecurityContext) { s.RunAsUser = &runtimeapi.Int64Value{Value: 0} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := securityPod(tc.psc, tc.csc)
			cfg, err := Container(Node{RootDir: "/var/lib/speclet"}, ContainerRequest{Pod: pod, Container: &pod.Spec.Containers[0], ImageUser: tc.img})
			if err != nil {
				t.Fatal(err)
			}
			want := base()
			tc.want(want)
			if got := cfg.Linux.SecurityContext; !reflect.DeepEqual(got, want) {
				t.Errorf("security context\n got %v\nwant %v", got, want)
			}
		})
	}
}

// TestSecurityContainerErrors: what kubelet refuses to create is refused in
// kubelet's words, or with the pod, the container and the field named.
func TestSecurityContainerErrors(t *testing.T) {
	const who = `(pod: "p_ns(uid-1)", container: c)`
	for _, tc := range []struct {
		name string
		psc  *v1.PodSecurityContext
		csc  *v1.SecurityContext
		img  ImageUser
		want string
	}{
		{"runAsNonRoot with runAsUser 0", nil, &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](0)}, ImageUser{},
			"container's runAsUser breaks non-root policy " + who},
		{"pod runAsNonRoot, container runAsUser 0", &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, &v1.SecurityContext{RunAsUser: ptr.To[int64](0)}, ImageUser{},
			"container's runAsUser breaks non-root policy " + who},
		{"runAsNonRoot with a root image", nil, &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}, ImageUser{UID: ptr.To[int64](0)},
			"container has runAsNonRoot and image will run as root " + who},
		{"runAsNonRoot with a named image user", nil, &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}, ImageUser{Username: "app"},
			"container has runAsNonRoot and image has non-numeric user (app), cannot verify user is non-root " + who},
		{"runAsNonRoot with an invalid image uid", nil, &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}, ImageUser{UID: ptr.To[int64](1 << 40)},
			"container has runAsNonRoot and image has an invalid user id (1099511627776). (Must be 1-(2147483647)): must be between 0 and 2147483647, inclusive " + who},
		{"seccomp Localhost without a profile", nil, &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}}, ImageUser{},
			`pod ns/p container "c": securityContext.seccompProfile: localhostProfile must be set if seccompProfile type is Localhost`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := securityPod(tc.psc, tc.csc)
			_, err := Container(Node{}, ContainerRequest{Pod: pod, Container: &pod.Spec.Containers[0], ImageUser: tc.img})
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestSecurityImageUserOf: the runtime's uid, else its user name, else
// root.
func TestSecurityImageUserOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		img  *runtimeapi.Image
		want ImageUser
	}{
		{"numeric", &runtimeapi.Image{Uid: &runtimeapi.Int64Value{Value: 1234}}, ImageUser{UID: ptr.To[int64](1234)}},
		{"name", &runtimeapi.Image{Username: "app"}, ImageUser{Username: "app"}},
		{"no user", &runtimeapi.Image{}, ImageUser{UID: ptr.To[int64](0)}},
		{"unknown image", nil, ImageUser{UID: ptr.To[int64](0)}},
	} {
		if got := ImageUserOf(tc.img); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: ImageUserOf = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestSecurityNeedsImageUser: only a runAsNonRoot container that names no
// user needs its image's user.
func TestSecurityNeedsImageUser(t *testing.T) {
	for _, tc := range []struct {
		name string
		psc  *v1.PodSecurityContext
		csc  *v1.SecurityContext
		want bool
	}{
		{"nothing", nil, nil, false},
		{"pod runAsNonRoot", &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, nil, true},
		{"runAsNonRoot false", nil, &v1.SecurityContext{RunAsNonRoot: ptr.To(false)}, false},
		{"runAsNonRoot with pod user", &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1)}, nil, false},
		{"container runAsNonRoot with container user", nil, &v1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1)}, false},
	} {
		pod := securityPod(tc.psc, tc.csc)
		if got := NeedsImageUser(pod, &pod.Spec.Containers[0]); got != tc.want {
			t.Errorf("%s: NeedsImageUser = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSecurityAppArmor: a profile other than Unconfined is refused at
// admission on a node without AppArmor, and passed to the runtime on one
// with it; Unconfined and no profile always pass.
func TestSecurityAppArmor(t *testing.T) {
	local := &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("k8s-deny-write")}
	for _, tc := range []struct {
		name    string
		psc     *v1.PodSecurityContext
		csc     *v1.SecurityContext
		ann     map[string]string
		enabled bool
		want    string // refusal message, "" for admitted
	}{
		{"none, disabled", nil, nil, nil, false, ""},
		{"unconfined, disabled", &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}}, nil, nil, false, ""},
		{"pod runtime default, disabled", &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}, nil, nil, false,
			"Cannot enforce AppArmor: AppArmor is not enabled on the host"},
		{"container localhost, disabled", nil, &v1.SecurityContext{AppArmorProfile: local}, nil, false,
			"Cannot enforce AppArmor: AppArmor is not enabled on the host"},
		{"annotation localhost, disabled", nil, nil, map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "c": "localhost/x"}, false,
			"Cannot enforce AppArmor: AppArmor is not enabled on the host"},
		{"container localhost, enabled", nil, &v1.SecurityContext{AppArmorProfile: local}, nil, true, ""},
		{"empty localhost, enabled", nil, &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To(" ")}}, nil, true,
			"Cannot enforce AppArmor: invalid empty AppArmor profile name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := securityPod(tc.psc, tc.csc)
			pod.Annotations = tc.ann
			reason, msg, ok := appArmorAdmit(pod, tc.enabled)
			if tc.want == "" {
				if !ok {
					t.Fatalf("refused: %s %s", reason, msg)
				}
				return
			}
			if ok || reason != ReasonAppArmor || !strings.HasPrefix(msg, tc.want) {
				t.Errorf("admit = %v %q %q, want refused %q", ok, reason, msg, tc.want)
			}
		})
	}
	// The CRI form of each profile, and a profile never dropped: on a
	// node without AppArmor, building the container is an error naming
	// the field.
	for _, tc := range []struct {
		profile    *v1.AppArmorProfile
		want       *runtimeapi.SecurityProfile
		deprecated string
	}{
		{&v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, "unconfined"},
		{&v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, "runtime/default"},
		{local, &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "k8s-deny-write"}, "localhost/k8s-deny-write"},
	} {
		pod := securityPod(nil, &v1.SecurityContext{AppArmorProfile: tc.profile})
		cfg, err := Container(Node{}, ContainerRequest{Pod: pod, Container: &pod.Spec.Containers[0]})
		if tc.profile.Type != v1.AppArmorProfileTypeUnconfined && !appArmorEnabled() {
			want := `pod ns/p container "c": securityContext.appArmorProfile: cannot enforce AppArmor profile ` + string(tc.profile.Type) + ": AppArmor is not enabled on the host"
			if err == nil || err.Error() != want {
				t.Errorf("%s: err = %v, want %s", tc.profile.Type, err, want)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := cfg.Linux.SecurityContext
		if !reflect.DeepEqual(sc.Apparmor, tc.want) || sc.ApparmorProfile != tc.deprecated {
			t.Errorf("%s: apparmor %v %q, want %v %q", tc.profile.Type, sc.Apparmor, sc.ApparmorProfile, tc.want, tc.deprecated)
		}
	}
}

// TestSecuritySandbox: the sandbox is privileged when any container is,
// runs under the runtime's default seccomp profile, and carries the pod's
// user, group, groups, SELinux options and sysctls.
func TestSecuritySandbox(t *testing.T) {
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	runtimeDefault := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	for _, tc := range []struct {
		name        string
		psc         *v1.PodSecurityContext
		init        *v1.SecurityContext
		want        *runtimeapi.LinuxSandboxSecurityContext
		wantSysctls map[string]string
	}{
		{"nothing set", nil, nil,
			&runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns, Seccomp: runtimeDefault}, map[string]string{}},
		{"privileged init container", nil, &v1.SecurityContext{Privileged: ptr.To(true)},
			&runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns, Seccomp: runtimeDefault, Privileged: true}, map[string]string{}},
		{"pod user, group, groups, SELinux, seccomp Unconfined", &v1.PodSecurityContext{
			RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000), FSGroup: ptr.To[int64](2000),
			SupplementalGroups: []int64{4000}, SELinuxOptions: &v1.SELinuxOptions{Level: "s0:c1"},
			SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined},
			RunAsNonRoot:   ptr.To(true),
		}, nil,
			&runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns, Seccomp: runtimeDefault,
				RunAsUser: &runtimeapi.Int64Value{Value: 1000}, RunAsGroup: &runtimeapi.Int64Value{Value: 3000},
				SupplementalGroups: []int64{2000, 4000}, SelinuxOptions: &runtimeapi.SELinuxOption{Level: "s0:c1"}}, map[string]string{}},
		{"sysctls", &v1.PodSecurityContext{Sysctls: []v1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}, {Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}}, nil,
			&runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns, Seccomp: runtimeDefault},
			map[string]string{"kernel.shm_rmid_forced": "1", "net.ipv4.ip_unprivileged_port_start": "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := securityPod(tc.psc, nil)
			if tc.init != nil {
				pod.Spec.InitContainers = []v1.Container{{Name: "i", SecurityContext: tc.init}}
			}
			cfg, err := Sandbox(Node{}, SandboxRequest{Pod: pod})
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Linux.SecurityContext; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("sandbox security context\n got %v\nwant %v", got, tc.want)
			}
			if got := cfg.Linux.Sysctls; !reflect.DeepEqual(got, tc.wantSysctls) {
				t.Errorf("sysctls = %v, want %v", got, tc.wantSysctls)
			}
			if cfg.Linux.SecurityContext.ReadonlyRootfs {
				t.Error("sandbox root file system is read-only")
			}
		})
	}
}
