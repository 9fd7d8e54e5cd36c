package containerdtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/volume"
)

// TestContainerdPodEnvironment runs busybox pods on a real containerd and
// reads back what their containers see, as kubelet provides it:
//   - env from fieldRef (metadata.name, status.podIP), a configMap key,
//     envFrom with a prefix, and $(VAR) composition;
//   - /etc/hosts managed by the node: the pod's IP with its FQDN
//     (hostname, subdomain) and the hostAliases section; for a hostNetwork
//     pod the node's hosts file with the aliases;
//   - /etc/resolv.conf from --cluster-dns/--cluster-domain, the node's
//     search path (--resolv-conf) and the pod's dnsConfig;
//   - the hostname of setHostnameAsFQDN;
//   - a configMap key that does not exist: the container waits with
//     CreateContainerConfigError and kubelet's message.
//
// At the end the pod's hosts file is removed with its directory.
func TestContainerdPodEnvironment(t *testing.T) {
	c, ctx := containerdFor(t, 3*time.Minute)
	root := filepath.Join(t.TempDir(), "root")
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.1\nsearch node.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	api := objectAPI{configMaps: map[string]*v1.ConfigMap{"default/settings": {Data: map[string]string{"color": "blue", "size": "L"}}}}

	out := t.TempDir()
	dirType := v1.HostPathDirectory
	mk := func(name, script string) *v1.Pod {
		p := writesTo(shPod(c, name, v1.RestartPolicyNever, 1, script), out, &dirType)
		p.Spec.HostNetwork = false
		return p
	}
	fieldEnv := func(name, path string) v1.EnvVar {
		return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
	}
	envPod := mk("envpod", `env > /out/env; cat /etc/hosts > /out/hosts; cat /etc/resolv.conf > /out/resolv; hostname > /out/hostname`)
	envPod.Spec.Hostname, envPod.Spec.Subdomain, envPod.Spec.SetHostnameAsFQDN = "web", "sub", ptr.To(true)
	envPod.Spec.HostAliases = []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo.local", "bar.local"}}}
	envPod.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"192.0.2.53"}, Searches: []string{"my.search"},
		Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}}}
	envPod.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}}}
	envPod.Spec.Containers[0].Env = []v1.EnvVar{
		fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_IP", "status.podIP"), fieldEnv("HOST_IP", "status.hostIP"),
		{Name: "COLOR", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Key: "color"}}},
		{Name: "SUMMARY", Value: "$(POD_NAME)-$(COLOR)-$(CFG_size)"},
	}
	hostPod := mk("hostpod", `cat /etc/hosts > /out/host-hosts`)
	hostPod.Spec.HostNetwork = true
	hostPod.Spec.HostAliases = []v1.HostAlias{{IP: "10.9.9.9", Hostnames: []string{"alias.local"}}}
	missing := mk("missingkey", `true`)
	missing.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Key: "nope"}}}}
	_, e, updates := startPods(ctx, t, c, engine.Config{RootDir: root, NodeIP: "127.0.0.1",
		ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: resolv, VolumeAPI: api},
		envPod, hostPod, missing)

	var podIP, waiting, message string
	waitFor(t, ctx, "envpod and hostpod Succeeded, missingkey waiting with CreateContainerConfigError", func() bool {
		var okEnv, okHost, okMissing bool
		for _, p := range e.Pods() {
			switch p.Name {
			case "envpod":
				okEnv, podIP = p.Status.Phase == v1.PodSucceeded, p.Status.PodIP
			case "hostpod":
				okHost = p.Status.Phase == v1.PodSucceeded
			case "missingkey":
				if cs := p.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Waiting != nil {
					waiting, message = cs[0].State.Waiting.Reason, cs[0].State.Waiting.Message
				}
				okMissing = waiting == engine.ReasonCreateContainerConfig
			}
		}
		return okEnv && okHost && okMissing
	}, e)

	read := func(name string) string { return written(t, out, name) }
	env := map[string]string{}
	for _, line := range strings.Split(read("env"), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	for k, want := range map[string]string{"POD_NAME": "envpod", "POD_IP": podIP, "HOST_IP": "127.0.0.1", "COLOR": "blue",
		"CFG_color": "blue", "CFG_size": "L", "SUMMARY": "envpod-blue-L"} {
		if env[k] != want || want == "" {
			t.Errorf("env %s=%q, want %q", k, env[k], want)
		}
	}
	hosts := read("hosts")
	for _, want := range []string{"# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n",
		podIP + "\tweb.sub.default.svc.cluster.local\tweb\n",
		"\n# Entries added by HostAliases.\n123.45.67.89\tfoo.local\tbar.local\n"} {
		if !strings.Contains(hosts, want) {
			t.Errorf("/etc/hosts lacks %q:\n%s", want, hosts)
		}
	}
	resolvConf := read("resolv")
	for _, want := range []string{"nameserver 10.96.0.10\nnameserver 192.0.2.53\n",
		"search default.svc.cluster.local svc.cluster.local cluster.local node.example my.search\n", "options ndots:2 edns0\n"} {
		if !strings.Contains(resolvConf, want) {
			t.Errorf("/etc/resolv.conf lacks %q:\n%s", want, resolvConf)
		}
	}
	if h := strings.TrimSpace(read("hostname")); h != "web.sub.default.svc.cluster.local" {
		t.Errorf("hostname %q, want the FQDN", h)
	}
	node, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := read("host-hosts"), "# Kubernetes-managed hosts file (host network).\n"+string(node)+"\n# Entries added by HostAliases.\n10.9.9.9\talias.local\n"; got != want {
		t.Errorf("hostNetwork /etc/hosts\n%q\nwant\n%q", got, want)
	}
	if message != "couldn't find key nope in ConfigMap default/settings" {
		t.Errorf("waiting message %q, want kubelet's", message)
	}

	hostsFile := filepath.Join(volume.PodDir(root, envPod.UID), "etc-hosts")
	if _, err := os.Stat(hostsFile); err != nil {
		t.Errorf("hosts file %s: %v", hostsFile, err)
	}
	removePods(updates, envPod, hostPod, missing)
	waitFor(t, ctx, "the pod's hosts file removed", gone(hostsFile), e)
}
