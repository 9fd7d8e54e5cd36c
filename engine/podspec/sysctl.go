package podspec

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"

	"golang.org/x/sys/unix"
)

// ReasonSysctlForbidden is kubelet's admission refusal of a pod whose
// sysctls are not allowed on the node.
const ReasonSysctlForbidden = "SysctlForbidden"

// safeSysctls are kubelet v1.34's safe sysctls: namespaced, and without
// effect on other pods. A kernel older than the version given does not
// namespace the sysctl, so it is not safe there.
var safeSysctls = []struct{ name, kernel string }{
	{"kernel.shm_rmid_forced", ""},
	{"net.ipv4.ip_local_port_range", ""},
	{"net.ipv4.tcp_syncookies", ""},
	{"net.ipv4.ping_group_range", ""},
	{"net.ipv4.ip_unprivileged_port_start", ""},
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_keepalive_time", "4.5"},
	{"net.ipv4.tcp_fin_timeout", "4.6"},
	{"net.ipv4.tcp_keepalive_intvl", "4.5"},
	{"net.ipv4.tcp_keepalive_probes", "4.5"},
	{"net.ipv4.tcp_rmem", "4.15"},
	{"net.ipv4.tcp_wmem", "4.15"},
}

// Sysctls is the node's sysctl allowlist (kubelet's patternAllowlist): the
// safe sysctls of its kernel and those --allowed-unsafe-sysctls names
// (a name, or a prefix ending in "*").
type Sysctls struct {
	names, prefixes map[string]utilsysctl.Namespace
}

// NewSysctls builds the allowlist for a kernel release (uname -r; "" or
// unparsable keeps only the sysctls safe on every kernel) and the unsafe
// sysctls the operator allows. An unsafe pattern that is not known to be
// namespaced is an error naming it, as under kubelet.
func NewSysctls(kernel string, unsafe []string) (*Sysctls, error) {
	kv, _ := version.ParseGeneric(kernel)
	s := &Sysctls{names: map[string]utilsysctl.Namespace{}, prefixes: map[string]utilsysctl.Namespace{}}
	var patterns []string
	for _, sc := range safeSysctls {
		if sc.kernel == "" || (kv != nil && kv.AtLeast(version.MustParseGeneric(sc.kernel))) {
			patterns = append(patterns, sc.name)
		}
	}
	for _, p := range append(patterns, unsafe...) {
		ns, nameOrPrefix, prefixed := utilsysctl.GetNamespace(p)
		if ns == utilsysctl.UnknownNamespace {
			return nil, fmt.Errorf("the sysctls %q are not known to be namespaced", nameOrPrefix)
		}
		if prefixed {
			s.prefixes[nameOrPrefix] = ns
		} else {
			s.names[nameOrPrefix] = ns
		}
	}
	return s, nil
}

// Admit checks the pod's sysctls against the allowlist: each must be
// allowed, and a network or IPC sysctl may not be set by a pod that shares
// that namespace with the node. The message is kubelet's.
func (s *Sysctls) Admit(pod *v1.Pod) (reason, message string, ok bool) {
	if pod.Spec.SecurityContext == nil {
		return "", "", true
	}
	for _, sc := range pod.Spec.SecurityContext.Sysctls {
		if err := s.check(sc.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
			return ReasonSysctlForbidden, fmt.Sprintf("forbidden sysctl: %v", err), false
		}
	}
	return "", "", true
}

func (s *Sysctls) check(name string, hostNet, hostIPC bool) error {
	name = utilsysctl.NormalizeName(name)
	shared := func(ns utilsysctl.Namespace) error {
		if (ns == utilsysctl.IPCNamespace && hostIPC) || (ns == utilsysctl.NetNamespace && hostNet) {
			return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
		}
		return nil
	}
	if ns, ok := s.names[name]; ok {
		return shared(ns)
	}
	for p, ns := range s.prefixes {
		if strings.HasPrefix(name, p) {
			return shared(ns)
		}
	}
	return fmt.Errorf("%q not allowlisted", name)
}

// KernelRelease is this machine's kernel release (uname -r), "" when it
// cannot be read.
func KernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}
