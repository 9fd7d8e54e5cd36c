package podspec

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestSysctls: kubelet's sysctl admission, case by case.
func TestSysctls(t *testing.T) {
	pod := func(hostNet, hostIPC bool, names ...string) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{HostNetwork: hostNet, HostIPC: hostIPC, SecurityContext: &v1.PodSecurityContext{}}}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		kernel string
		unsafe []string
		pod    *v1.Pod
		msg    string // "" admitted
	}{
		{"none", "6.1.0", nil, &v1.Pod{}, ""},
		{"safe", "6.1.0", nil, pod(false, false, "kernel.shm_rmid_forced", "net.ipv4.tcp_syncookies"), ""},
		{"safe with slashes", "6.1.0", nil, pod(false, false, "net/ipv4/ip_local_port_range"), ""},
		{"unsafe not allowed", "6.1.0", nil, pod(false, false, "kernel.msgmax"), `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{"unsafe allowed", "6.1.0", []string{"kernel.msg*"}, pod(false, false, "kernel.msgmax"), ""},
		{"unknown", "6.1.0", nil, pod(false, false, "foo-"), `forbidden sysctl: "foo-" not allowlisted`},
		{"net with host network", "6.1.0", nil, pod(true, false, "net.ipv4.ip_local_port_range"), `forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host Net enabled`},
		{"ipc with host ipc", "6.1.0", nil, pod(false, true, "kernel.shm_rmid_forced"), `forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host IPC enabled`},
		{"too old a kernel", "4.4.0", nil, pod(false, false, "net.ipv4.tcp_keepalive_time"), `forbidden sysctl: "net.ipv4.tcp_keepalive_time" not allowlisted`},
		{"new enough", "4.5.0-1-amd64", nil, pod(false, false, "net.ipv4.tcp_keepalive_time"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSysctls(tc.kernel, tc.unsafe)
			if err != nil {
				t.Fatal(err)
			}
			reason, msg, ok := s.Admit(tc.pod)
			if ok != (tc.msg == "") || msg != tc.msg || (!ok && reason != "SysctlForbidden") {
				t.Errorf("Admit = %s %q %v, want %q", reason, msg, ok, tc.msg)
			}
		})
	}
	if _, err := NewSysctls("6.1.0", []string{"vm.swappiness"}); err == nil || err.Error() != `the sysctls "vm.swappiness" are not known to be namespaced` {
		t.Errorf("unsafe vm.swappiness: err = %v, want it refused as not namespaced", err)
	}
	if KernelRelease() == "" {
		t.Error("KernelRelease is empty on this machine")
	}
}
