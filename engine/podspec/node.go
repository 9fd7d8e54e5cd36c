package podspec

import (
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// Node is what the translation reads about the node it runs on.
type Node struct {
	// RootDir is --root-dir: pod volumes, logs and per-container files
	// live under it.
	RootDir string
	// MemoryCapacity is the node's memory in bytes (a container's
	// oom_score_adj depends on it); 0: unknown.
	MemoryCapacity int64
	// Static reports whether a pod is a static pod (its QoS score differs).
	Static func(*v1.Pod) bool
	// Name is the node's name (spec.nodeName of a pod that has none).
	Name string
	// IP is the node's address (a DNS server of 127.0.0.1 or ::1 follows
	// its family when there is no --resolv-conf).
	IP string
	// Allocatable is what a resourceFieldRef limit the container does not
	// set falls back to (cpu, memory, ephemeral-storage).
	Allocatable v1.ResourceList
	// ClusterDNS are the cluster's DNS servers (--cluster-dns), and
	// ClusterDomain its domain (--cluster-domain).
	ClusterDNS    []string
	ClusterDomain string
	// ResolvConf is the resolver file Default DNS copies (--resolv-conf);
	// "": none.
	ResolvConf string
	// Warn records a Warning event about pod (the sandbox's DNS
	// warnings); nil: none are recorded.
	Warn func(pod *v1.Pod, reason, message string)
	// HostsPath is the node's hosts file, the base of a hostNetwork pod's
	// /etc/hosts; "": /etc/hosts.
	HostsPath string
	// PodLogsDir holds each pod's log directory, the sandbox's
	// LogDirectory (kubelet's podLogsDir, /var/log/pods); "":
	// <RootDir>/logs.
	PodLogsDir string
	// LogLinksDir holds a link to each running container's log file, where
	// log shippers look (kubelet's /var/log/containers); "": no links.
	LogLinksDir string
}

// LogsDir is the directory of the pods' log directories (PodLogsDir).
func (n Node) LogsDir() string {
	if n.PodLogsDir == "" {
		return filepath.Join(n.RootDir, "logs")
	}
	return n.PodLogsDir
}

// LogDir is the sandbox LogDirectory of pod in podLogsDir:
// <podLogsDir>/<namespace>_<name>_<uid>.
func LogDir(podLogsDir string, pod *v1.Pod) string {
	return filepath.Join(podLogsDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

func (n Node) static(pod *v1.Pod) bool {
	return n.Static != nil && n.Static(pod)
}
