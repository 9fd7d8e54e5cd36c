package podspec

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageUser is the user an image runs as: its numeric id (UID) or, when
// not numeric, its name (Username). The zero value says nothing about the
// image (ContainerRequest.ImageUser not looked up).
type ImageUser struct {
	UID      *int64
	Username string
}

// ImageUserOf is the user of an image as the runtime's ImageStatus reports
// it; an image that names no user, or that the runtime does not know, runs
// as root (kubelet's getImageUser).
func ImageUserOf(img *runtimeapi.Image) ImageUser {
	switch {
	case img != nil && img.Uid != nil:
		uid := img.Uid.Value
		return ImageUser{UID: &uid}
	case img != nil && img.Username != "":
		return ImageUser{Username: img.Username}
	}
	return ImageUser{UID: new(int64)}
}

// NeedsImageUser reports whether creating c needs its image's user: the
// container must run as non-root and its security context names no
// user, so only the image can say who it runs as.
func NeedsImageUser(pod *v1.Pod, c *v1.Container) bool {
	sc := effectiveSecurityContext(pod, c)
	return sc.RunAsNonRoot != nil && *sc.RunAsNonRoot && sc.RunAsUser == nil
}

// effectiveSecurityContext merges the pod's security context into the
// container's, the container's fields winning (kubelet's
// DetermineEffectiveSecurityContext). Of the pod's, only the fields a
// container also has apply: SELinux options, user, group, runAsNonRoot.
func effectiveSecurityContext(pod *v1.Pod, c *v1.Container) v1.SecurityContext {
	var sc v1.SecurityContext
	if p := pod.Spec.SecurityContext; p != nil {
		sc.SELinuxOptions = p.SELinuxOptions
		sc.RunAsUser = p.RunAsUser
		sc.RunAsGroup = p.RunAsGroup
		sc.RunAsNonRoot = p.RunAsNonRoot
	}
	cs := c.SecurityContext
	if cs == nil {
		return sc
	}
	override(&sc.SELinuxOptions, cs.SELinuxOptions)
	override(&sc.Capabilities, cs.Capabilities)
	override(&sc.Privileged, cs.Privileged)
	override(&sc.RunAsUser, cs.RunAsUser)
	override(&sc.RunAsGroup, cs.RunAsGroup)
	override(&sc.RunAsNonRoot, cs.RunAsNonRoot)
	override(&sc.ReadOnlyRootFilesystem, cs.ReadOnlyRootFilesystem)
	override(&sc.AllowPrivilegeEscalation, cs.AllowPrivilegeEscalation)
	override(&sc.ProcMount, cs.ProcMount)
	return sc
}

// override sets *dst to v when the container gives v (a field it leaves nil
// keeps the pod's value).
func override[T any](dst **T, v *T) {
	if v != nil {
		*dst = v
	}
}

// containerSecurity is the Linux security context of c (kubelet's
// determineEffectiveSecurityContext): user, group and supplemental groups,
// capabilities, privileged, read-only root, no_new_privs, seccomp and
// AppArmor profiles, SELinux options, masked and read-only /proc paths,
// and the namespaces ns. It refuses a container that must run as non-root
// but would run as root (kubelet's verifyRunAsNonRoot, its words).
func containerSecurity(n Node, pod *v1.Pod, c *v1.Container, img ImageUser, ns *runtimeapi.NamespaceOption) (*runtimeapi.LinuxContainerSecurityContext, error) {
	sc := effectiveSecurityContext(pod, c)
	if err := verifyRunAsNonRoot(pod, c, &sc, img); err != nil {
		return nil, err
	}
	out := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}
	if caps := sc.Capabilities; caps != nil {
		out.Capabilities = &runtimeapi.Capability{
			AddCapabilities:  make([]string, len(caps.Add)),
			DropCapabilities: make([]string, len(caps.Drop)),
		}
		for i, a := range caps.Add {
			out.Capabilities.AddCapabilities[i] = string(a)
		}
		for i, d := range caps.Drop {
			out.Capabilities.DropCapabilities[i] = string(d)
		}
	}
	out.SelinuxOptions = selinuxOptions(sc.SELinuxOptions)
	if sc.RunAsUser != nil {
		out.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
	} else {
		if img.UID != nil {
			out.RunAsUser = &runtimeapi.Int64Value{Value: *img.UID}
		}
		out.RunAsUsername = img.Username
	}
	if sc.RunAsGroup != nil {
		out.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
	}
	out.Privileged = sc.Privileged != nil && *sc.Privileged
	out.ReadonlyRootfs = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	// no_new_privs only when allowPrivilegeEscalation is false: unset
	// leaves the process free to gain privileges (kubelet's
	// AddNoNewPrivileges).
	out.NoNewPrivs = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation

	var err error
	if out.Seccomp, err = seccompProfile(n, pod, c); err != nil {
		return nil, fieldErr(pod, c, "securityContext.seccompProfile", err)
	}
	if out.Apparmor, out.ApparmorProfile, err = appArmorProfile(pod, c); err != nil {
		return nil, fieldErr(pod, c, "securityContext.appArmorProfile", err)
	}
	groups, err := supplementalGroups(pod)
	if err != nil {
		return nil, fieldErr(pod, c, "securityContext.supplementalGroupsPolicy", err)
	}
	out.SupplementalGroups = groups
	if p := pod.Spec.SecurityContext; p != nil && p.SupplementalGroupsPolicy != nil {
		out.SupplementalGroupsPolicy = runtimeapi.SupplementalGroupsPolicy(runtimeapi.SupplementalGroupsPolicy_value[string(*p.SupplementalGroupsPolicy)])
	}
	out.MaskedPaths = maskedPaths(sc.ProcMount)
	out.ReadonlyPaths = readonlyPaths(sc.ProcMount)
	return out, nil
}

// verifyRunAsNonRoot: a container with runAsNonRoot must run as a user
// other than root, known from its security context or, when that names no
// user, from its image's numeric user.
func verifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, sc *v1.SecurityContext, img ImageUser) error {
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		return nil
	}
	who := pod.Name + "_" + pod.Namespace + "(" + string(pod.UID) + ")"
	if sc.RunAsUser != nil {
		if *sc.RunAsUser == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", who, c.Name)
		}
		return nil
	}
	switch {
	case img.UID == nil && img.Username != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)", img.Username, who, c.Name)
	case img.UID != nil && *img.UID == 0:
		return fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", who, c.Name)
	case img.UID != nil && (*img.UID < 0 || *img.UID > math.MaxInt32):
		return fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): must be between 0 and %d, inclusive (pod: %q, container: %s)",
			*img.UID, math.MaxInt32, math.MaxInt32, who, c.Name)
	}
	return nil
}

// supplementalGroups are the pod's fsGroup, then its supplementalGroups.
func supplementalGroups(pod *v1.Pod) ([]int64, error) {
	p := pod.Spec.SecurityContext
	if p == nil {
		return nil, nil
	}
	var groups []int64
	if p.FSGroup != nil {
		groups = append(groups, *p.FSGroup)
	}
	groups = append(groups, p.SupplementalGroups...)
	if p.SupplementalGroupsPolicy != nil {
		if _, ok := runtimeapi.SupplementalGroupsPolicy_value[string(*p.SupplementalGroupsPolicy)]; !ok {
			return nil, fmt.Errorf("unsupported supplementalGroupsPolicy: %s", *p.SupplementalGroupsPolicy)
		}
	}
	return groups, nil
}

func selinuxOptions(o *v1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// seccompProfile is the container's profile, else the pod's, else
// Unconfined (kubelet without --seccomp-default). A Localhost profile is a
// file under <root-dir>/seccomp.
func seccompProfile(n Node, pod *v1.Pod, c *v1.Container) (*runtimeapi.SecurityProfile, error) {
	var p *v1.SeccompProfile
	if ps := pod.Spec.SecurityContext; ps != nil && ps.SeccompProfile != nil {
		p = ps.SeccompProfile
	}
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		p = c.SecurityContext.SeccompProfile
	}
	switch {
	case p == nil || p.Type == v1.SeccompProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	case p.Type == v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case p.Type == v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, errors.New("localhostProfile must be set if seccompProfile type is Localhost")
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost,
			LocalhostRef: filepath.Join(n.RootDir, "seccomp", *p.LocalhostProfile)}, nil
	}
	return nil, fmt.Errorf("unknown seccomp profile type %q", p.Type)
}

// defaultMaskedPaths are the /proc and /sys paths a container does not see
// (kubelet's list, the runtime's defaults), with each CPU's thermal
// throttle directory this node has.
var defaultMaskedPaths = sync.OnceValue(func() []string {
	paths := []string{
		"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	cpus, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/thermal_throttle")
	return append(paths, cpus...)
})

// defaultReadonlyPaths are the /proc paths a container sees read-only.
var defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}

// DefaultMaskedPaths and DefaultReadonlyPaths are what every container
// under the default procMount is given (a new slice each call), for
// measuring what they cost (cri/floor).
func DefaultMaskedPaths() []string   { return maskedPaths(nil) }
func DefaultReadonlyPaths() []string { return append([]string(nil), defaultReadonlyPaths...) }

// maskedPaths: none under procMount Unmasked, else the defaults. A
// privileged container gets the defaults too: the runtime leaves a
// privileged container's /proc unmasked itself.
func maskedPaths(pm *v1.ProcMountType) []string {
	if pm != nil && *pm == v1.UnmaskedProcMount {
		return []string{}
	}
	return append([]string(nil), defaultMaskedPaths()...)
}

func readonlyPaths(pm *v1.ProcMountType) []string {
	if pm != nil && *pm == v1.UnmaskedProcMount {
		return []string{}
	}
	return append([]string(nil), defaultReadonlyPaths...)
}

// hasPrivilegedContainer: any init or app container asks to be privileged.
func hasPrivilegedContainer(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if sc := cs[i].SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
				return true
			}
		}
	}
	return false
}

// sandboxSecurity is the sandbox's Linux security context (kubelet's
// generatePodSandboxLinuxConfig): privileged when any container is, the
// runtime's default seccomp profile, the pod's user, group, fsGroup and
// supplemental groups, and SELinux options; and the pod's sysctls.
func sandboxSecurity(pod *v1.Pod, ns *runtimeapi.NamespaceOption) (*runtimeapi.LinuxSandboxSecurityContext, map[string]string, error) {
	out := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: ns,
		Privileged:       hasPrivilegedContainer(pod),
		Seccomp:          &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
	}
	sysctls := map[string]string{}
	p := pod.Spec.SecurityContext
	if p == nil {
		return out, sysctls, nil
	}
	for _, s := range p.Sysctls {
		sysctls[s.Name] = s.Value
	}
	if p.RunAsUser != nil {
		out.RunAsUser = &runtimeapi.Int64Value{Value: *p.RunAsUser}
	}
	if p.RunAsGroup != nil {
		out.RunAsGroup = &runtimeapi.Int64Value{Value: *p.RunAsGroup}
	}
	groups, err := supplementalGroups(pod)
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s: spec.securityContext.supplementalGroupsPolicy: %w", pod.Namespace, pod.Name, err)
	}
	out.SupplementalGroups = groups
	if p.SupplementalGroupsPolicy != nil {
		out.SupplementalGroupsPolicy = runtimeapi.SupplementalGroupsPolicy(runtimeapi.SupplementalGroupsPolicy_value[string(*p.SupplementalGroupsPolicy)])
	}
	out.SelinuxOptions = selinuxOptions(p.SELinuxOptions)
	return out, sysctls, nil
}
