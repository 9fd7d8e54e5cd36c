package podspec

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/volume"
)

// EtcHostsPath is where a container sees its hosts file.
const EtcHostsPath = "/etc/hosts"

// HostsFile is the pod's kubelet-managed hosts file under root:
// <root>/pods/<uid>/etc-hosts (removed with the pod's directory).
func HostsFile(root string, pod *v1.Pod) string {
	return filepath.Join(volume.PodDir(root, pod.UID), "etc-hosts")
}

// hostsMount writes the pod's hosts file and returns its mount at
// /etc/hosts, as kubelet's makeHostsMount: every container of a pod that
// has an IP gets it, unless the container mounts a volume at /etc/hosts
// itself (nil then). A pod in its own network namespace gets kubelet's
// managed content (localhost lines, its IPs with its hostname, and FQDN
// first with a subdomain); a hostNetwork pod gets the node's hosts file
// (n.HostsPath) behind kubelet's header. Both end with the hostAliases.
func hostsMount(n Node, r ContainerRequest) (*runtimeapi.Mount, error) {
	pod, c := r.Pod, r.Container
	if len(r.PodIPs) == 0 {
		return nil, nil
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == EtcHostsPath {
			return nil, nil
		}
	}
	var content []byte
	if pod.Spec.HostNetwork {
		path := n.HostsPath
		if path == "" {
			path = EtcHostsPath
		}
		node, err := nodeFiles.read(path)
		if err != nil {
			return nil, fieldErr(pod, c, "/etc/hosts", fmt.Errorf("read the node's hosts file: %w", err))
		}
		content = nodeHostsContent(node, pod.Spec.HostAliases)
	} else {
		host, domain, err := HostnameAndDomain(n, pod)
		if err != nil {
			return nil, fieldErr(pod, c, "/etc/hosts", err)
		}
		content = managedHostsContent(r.PodIPs, host, domain, pod.Spec.HostAliases)
	}
	file := HostsFile(n.RootDir, pod)
	if err := writeFileMode(file, content, 0o644, 0o750); err != nil {
		return nil, fieldErr(pod, c, "/etc/hosts", fmt.Errorf("write hosts file: %w", err))
	}
	return &runtimeapi.Mount{ContainerPath: EtcHostsPath, HostPath: file, SelinuxRelabel: true}, nil
}

const (
	managedHostsHeader            = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
)

// managedHostsContent is kubelet's managedHostsFileContent.
func managedHostsContent(ips []string, host, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range ips {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, host, domain, host)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, host)
		}
	}
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

// nodeHostsContent is kubelet's nodeHostsFileContent: the node's file
// behind the host-network header, then the aliases.
func nodeHostsContent(node []byte, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeaderHostNetwork)
	b.Write(node)
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

// hostAliasEntries: a blank line, a comment, and one line per alias with
// all its hostnames.
func hostAliasEntries(aliases []v1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}

// HostnameAndDomain is the pod's hostname (spec.hostname, else its name,
// cut to 63 characters without a trailing '-' or '.') and its domain
// (<subdomain>.<namespace>.svc.<cluster domain> with a subdomain, else
// ""), as kubelet's GeneratePodHostNameAndDomain.
func HostnameAndDomain(n Node, pod *v1.Pod) (string, string, error) {
	host := pod.Name
	if pod.Spec.Hostname != "" {
		host = pod.Spec.Hostname
	}
	if len(host) > 63 {
		host = strings.TrimRight(host[:63], "-.")
		if host == "" {
			return "", "", fmt.Errorf("hostname for pod %q was invalid: %q", pod.Name, pod.Spec.Hostname)
		}
	}
	domain := ""
	if pod.Spec.Subdomain != "" {
		domain = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, n.ClusterDomain)
	}
	return host, domain, nil
}

// kernelHostname is the sandbox's hostname: the pod's hostname, or its
// FQDN under setHostnameAsFQDN with a domain (at most 64 characters, the
// kernel's limit), as kubelet's GetNodenameForKernel.
func kernelHostname(host, domain string, asFQDN *bool) (string, error) {
	if domain == "" || !isTrue(asFQDN) {
		return host, nil
	}
	fqdn := host + "." + domain
	if len(fqdn) > 64 {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (64 characters is the max, %d characters requested)", fqdn, len(fqdn))
	}
	return fqdn, nil
}
