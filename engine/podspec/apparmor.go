// AppArmor: the profile of a container and the admission check.

package podspec

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// appArmorEnabled reports whether the kernel enforces AppArmor (kubelet's
// test: the securityfs directory and the module's enabled flag).
var appArmorEnabled = sync.OnceValue(func() bool {
	if _, err := os.Stat("/sys/kernel/security/apparmor"); err != nil {
		return false
	}
	b, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && len(b) > 1 && b[0] == 'Y'
})

// appArmorProfileOf is the AppArmor profile of c: its own, else the
// deprecated per-container pod annotation, else the pod's; nil for none.
func appArmorProfileOf(pod *v1.Pod, c *v1.Container) *v1.AppArmorProfile {
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		return c.SecurityContext.AppArmorProfile
	}
	if v, ok := pod.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok {
		switch {
		case v == v1.DeprecatedAppArmorBetaProfileRuntimeDefault:
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
		case v == v1.DeprecatedAppArmorBetaProfileNameUnconfined:
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
		case strings.HasPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix):
			name := strings.TrimPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix)
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
		}
	}
	if ps := pod.Spec.SecurityContext; ps != nil && ps.AppArmorProfile != nil {
		return ps.AppArmorProfile
	}
	return nil
}

// appArmorProfile is the CRI form of c's AppArmor profile, with its
// deprecated string form. A profile other than Unconfined on a kernel
// without AppArmor is an error: kubelet refuses such a pod at admission
// (AppArmorAdmit), and it is never run unconfined.
func appArmorProfile(pod *v1.Pod, c *v1.Container) (*runtimeapi.SecurityProfile, string, error) {
	p := appArmorProfileOf(pod, c)
	if p == nil {
		return nil, "", nil
	}
	if p.Type != v1.AppArmorProfileTypeUnconfined && !appArmorEnabled() {
		return nil, "", fmt.Errorf("cannot enforce AppArmor profile %s: AppArmor is not enabled on the host", p.Type)
	}
	switch p.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, v1.DeprecatedAppArmorBetaProfileRuntimeDefault, nil
	case v1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, v1.DeprecatedAppArmorBetaProfileNameUnconfined, nil
	case v1.AppArmorProfileTypeLocalhost:
		if p.LocalhostProfile == nil || strings.TrimSpace(*p.LocalhostProfile) == "" {
			return nil, "", errors.New("missing localhost apparmor profile name")
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *p.LocalhostProfile},
			v1.DeprecatedAppArmorBetaProfileNamePrefix + *p.LocalhostProfile, nil
	}
	return nil, "", fmt.Errorf("unknown apparmor profile type: %q", p.Type)
}

// ReasonAppArmor is kubelet's admission refusal of a pod with an AppArmor
// profile the node cannot enforce.
const ReasonAppArmor = "AppArmor"

// AppArmorAdmit refuses a pod that asks for an AppArmor profile other than
// Unconfined when the kernel does not enforce AppArmor, or that names an
// empty Localhost profile, in kubelet's words.
func AppArmorAdmit(pod *v1.Pod) (reason, message string, ok bool) {
	return appArmorAdmit(pod, appArmorEnabled())
}

func appArmorAdmit(pod *v1.Pod, enabled bool) (reason, message string, ok bool) {
	var profiles []*v1.AppArmorProfile
	required := false
	each := func(c *v1.Container) {
		p := appArmorProfileOf(pod, c)
		if p != nil && p.Type != v1.AppArmorProfileTypeUnconfined {
			required = true
		}
		profiles = append(profiles, p)
	}
	for i := range pod.Spec.InitContainers {
		each(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		each(&pod.Spec.Containers[i])
	}
	if ps := pod.Spec.SecurityContext; ps != nil && ps.AppArmorProfile != nil && ps.AppArmorProfile.Type != v1.AppArmorProfileTypeUnconfined {
		required = true
	}
	if !required {
		return "", "", true
	}
	if !enabled {
		return ReasonAppArmor, "Cannot enforce AppArmor: AppArmor is not enabled on the host", false
	}
	for _, p := range profiles {
		if p != nil && p.Type == v1.AppArmorProfileTypeLocalhost && (p.LocalhostProfile == nil || strings.TrimSpace(*p.LocalhostProfile) == "") {
			return ReasonAppArmor, fmt.Sprintf("Cannot enforce AppArmor: invalid empty AppArmor profile name: %q", p), false
		}
	}
	return "", "", true
}
