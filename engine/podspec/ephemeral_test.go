package podspec

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestTargetNamespace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pid    runtimeapi.NamespaceMode
		target string
		want   runtimeapi.NamespaceMode
		wantID string
	}{
		{"own namespace, target", runtimeapi.NamespaceMode_CONTAINER, "abc", runtimeapi.NamespaceMode_TARGET, "abc"},
		{"own namespace, no target", runtimeapi.NamespaceMode_CONTAINER, "", runtimeapi.NamespaceMode_CONTAINER, ""},
		{"shared pod namespace keeps it", runtimeapi.NamespaceMode_POD, "abc", runtimeapi.NamespaceMode_POD, ""},
		{"host namespace keeps it", runtimeapi.NamespaceMode_NODE, "abc", runtimeapi.NamespaceMode_NODE, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &runtimeapi.ContainerConfig{Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Pid: tc.pid}}}}
			TargetNamespace(cfg, tc.target)
			ns := cfg.Linux.SecurityContext.NamespaceOptions
			if ns.Pid != tc.want || ns.TargetId != tc.wantID {
				t.Errorf("pid %v target %q, want %v %q", ns.Pid, ns.TargetId, tc.want, tc.wantID)
			}
		})
	}
}
