package podspec

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SandboxRequest is one RunPodSandbox of a pod.
type SandboxRequest struct {
	Pod *v1.Pod
	// Attempt is the sandbox's attempt number (0 for the first).
	Attempt uint32
	// CgroupParent is the pod's cgroup (--cgroups-per-qos), "" for the
	// runtime's default.
	CgroupParent string
	// Labels and Annotations are the caller's identity of the sandbox.
	Labels, Annotations map[string]string
	// UserNamespace is the pod's user namespace option (kubelet sends
	// mode NODE, or mode POD with the pod's ID mappings for hostUsers:
	// false); nil: none sent.
	UserNamespace *runtimeapi.UserNamespace
}

// Sandbox builds the RunPodSandbox config of r.Pod. hostNetwork pods get the
// node's network namespace (no CNI); others get a pod network namespace
// from the runtime's CNI. Linux.Resources carries the pod's requests and
// limits without the overhead, Linux.Overhead the overhead (kubelet's
// applySandboxResources).
func Sandbox(n Node, r SandboxRequest) (*runtimeapi.PodSandboxConfig, error) {
	pod := r.Pod
	hostname := ""
	if !pod.Spec.HostNetwork {
		host, domain, err := HostnameAndDomain(n, pod)
		if err == nil {
			hostname, err = kernelHostname(host, domain, pod.Spec.SetHostnameAsFQDN)
		}
		if err != nil {
			// As it is: kubelet's FailedCreatePodSandBox event reads
			// "Failed to create pod sandbox: failed to construct FQDN
			// ...", and e2e_node's Hostname spec matches that text.
			return nil, err
		}
	}
	dns, warns, err := DNS(n, pod)
	if err != nil {
		return nil, err
	}
	if n.Warn != nil {
		for _, w := range warns {
			n.Warn(pod, w.Reason, w.Message)
		}
	}
	ns := sandboxNamespaces(pod)
	ns.UsernsOptions = r.UserNamespace
	security, sysctls, err := sandboxSecurity(pod, ns)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: r.Attempt,
		},
		Hostname:     hostname,
		DnsConfig:    dns,
		LogDirectory: LogDir(n.LogsDir(), pod),
		PortMappings: portMappings(pod),
		Labels:       r.Labels,
		Annotations:  r.Annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent:    r.CgroupParent,
			SecurityContext: security,
			Sysctls:         sysctls,
			Resources:       sandboxResources(pod),
			Overhead:        overheadResources(pod),
		},
	}, nil
}

// sandboxNamespaces: the node's network, PID and IPC namespaces when the pod
// asks for them; a pod-wide PID namespace for shareProcessNamespace.
func sandboxNamespaces(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostPID {
		ns.Pid = runtimeapi.NamespaceMode_NODE
	} else if pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace {
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	return ns
}

// portMappings are the host ports of the pod's containers (none for a
// hostNetwork pod, whose ports are the node's).
func portMappings(pod *v1.Pod) []*runtimeapi.PortMapping {
	if pod.Spec.HostNetwork {
		return nil
	}
	var ports []*runtimeapi.PortMapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			proto := runtimeapi.Protocol_TCP
			switch p.Protocol {
			case v1.ProtocolUDP:
				proto = runtimeapi.Protocol_UDP
			case v1.ProtocolSCTP:
				proto = runtimeapi.Protocol_SCTP
			}
			ports = append(ports, &runtimeapi.PortMapping{Protocol: proto, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP})
		}
	}
	return ports
}
