package podspec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestDNS: the sandbox's resolver config for each dnsPolicy and dnsConfig
// field, as kubelet's GetPodDNS.
func TestDNS(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("# node\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nsearch example.com. corp.example .\noptions ndots:2 timeout:1\noptions ndots:3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cluster := Node{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: resolv}
	long := strings.Repeat("a", 254)
	for _, tc := range []struct {
		name     string
		node     Node
		pod      func(*v1.Pod)
		servers  string
		searches string
		options  string
		warn     string // reasons, space-separated
		err      string
	}{
		{name: "ClusterFirst (default)", node: cluster, servers: "10.96.0.10",
			searches: "ns.svc.cluster.local svc.cluster.local cluster.local example.com corp.example", options: "ndots:5"},
		{name: "ClusterFirst without a domain", node: Node{ClusterDNS: []string{"10.96.0.10", "10.96.0.11"}, ResolvConf: resolv},
			servers: "10.96.0.10 10.96.0.11", searches: "example.com corp.example", options: "ndots:5"},
		{name: "ClusterFirst on the host network is Default", node: cluster, pod: func(p *v1.Pod) { p.Spec.HostNetwork = true },
			servers: "192.0.2.53 192.0.2.54", searches: "example.com corp.example", options: "ndots:3 timeout:1"},
		{name: "ClusterFirstWithHostNet", node: cluster, pod: func(p *v1.Pod) { p.Spec.HostNetwork = true; p.Spec.DNSPolicy = v1.DNSClusterFirstWithHostNet },
			servers: "10.96.0.10", searches: "ns.svc.cluster.local svc.cluster.local cluster.local example.com corp.example", options: "ndots:5"},
		{name: "Default", node: cluster, pod: func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSDefault },
			servers: "192.0.2.53 192.0.2.54", searches: "example.com corp.example", options: "ndots:3 timeout:1"},
		{name: "Default without a resolver file", node: Node{}, pod: func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSDefault },
			servers: "127.0.0.1", searches: "."},
		{name: "Default without a resolver file on IPv6", node: Node{IP: "fd00::1"}, pod: func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSDefault },
			servers: "::1", searches: "."},
		{name: "ClusterFirst without cluster DNS falls back", node: Node{ClusterDomain: "cluster.local", ResolvConf: resolv},
			servers: "192.0.2.53 192.0.2.54", searches: "example.com corp.example", options: "ndots:3 timeout:1", warn: "MissingClusterDNS"},
		{name: "None with dnsConfig", node: cluster, pod: func(p *v1.Pod) {
			p.Spec.DNSPolicy = v1.DNSNone
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"resolv.conf.local"},
				Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}}}
		}, servers: "1.1.1.1", searches: "resolv.conf.local", options: "ndots:2 edns0"},
		{name: "None alone", node: cluster, pod: func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone }},
		{name: "dnsConfig appended without duplicates, options merged", node: cluster, pod: func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"10.96.0.10", "192.0.2.99"}, Searches: []string{"cluster.local", "my.search"},
				Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("1")}, {Name: "single-request"}}}
		}, servers: "10.96.0.10 192.0.2.99", searches: "ns.svc.cluster.local svc.cluster.local cluster.local example.com corp.example my.search",
			options: "ndots:1 single-request"},
		{name: "more than 3 nameservers are cut", node: cluster, pod: func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}}
		}, servers: "10.96.0.10 192.0.2.1 192.0.2.2", searches: "ns.svc.cluster.local svc.cluster.local cluster.local example.com corp.example",
			options: "ndots:5", warn: "DNSConfigForming"},
		{name: "a search path too long is dropped", node: cluster, pod: func(p *v1.Pod) {
			p.Spec.DNSPolicy = v1.DNSNone
			p.Spec.DNSConfig = &v1.PodDNSConfig{Searches: []string{"ok.example", long}}
		}, searches: "ok.example", warn: "DNSConfigForming"},
		{name: "unknown policy", node: cluster, pod: func(p *v1.Pod) { p.Spec.DNSPolicy = "Sometimes" }, err: "dnsPolicy: invalid DNSPolicy=Sometimes"},
		{name: "unreadable resolver file", node: Node{ResolvConf: filepath.Join(t.TempDir(), "none")}, err: "read --resolv-conf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}}
			if tc.pod != nil {
				tc.pod(pod)
			}
			cfg, warns, err := DNS(tc.node, pod)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "pod ns/p") {
					t.Fatalf("err = %v, want %q naming the pod", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(cfg.Servers, " "); got != tc.servers {
				t.Errorf("servers %q, want %q", got, tc.servers)
			}
			if got := strings.Join(cfg.Searches, " "); got != tc.searches {
				t.Errorf("searches %q, want %q", got, tc.searches)
			}
			if got := strings.Join(cfg.Options, " "); got != tc.options {
				t.Errorf("options %q, want %q", got, tc.options)
			}
			var reasons []string
			for _, w := range warns {
				reasons = append(reasons, w.Reason)
			}
			if got := strings.Join(reasons, " "); got != tc.warn {
				t.Errorf("warnings %v, want %q", warns, tc.warn)
			}
		})
	}
}

// TestSandboxDNSAndHostname: the sandbox carries the DNS config, its
// hostname, and reports DNS warnings through Node.Warn.
func TestSandboxDNSAndHostname(t *testing.T) {
	var warned []string
	n := Node{RootDir: t.TempDir(), ClusterDomain: "cluster.local",
		Warn: func(pod *v1.Pod, reason, msg string) { warned = append(warned, pod.Name+" "+reason+": "+msg) }}
	for _, tc := range []struct {
		name string
		spec v1.PodSpec
		host string
		err  string
	}{
		{name: "pod name", host: "web-0"},
		{name: "spec.hostname", spec: v1.PodSpec{Hostname: "h"}, host: "h"},
		{name: "subdomain alone", spec: v1.PodSpec{Hostname: "h", Subdomain: "sub"}, host: "h"},
		{name: "setHostnameAsFQDN", spec: v1.PodSpec{Hostname: "h", Subdomain: "sub", SetHostnameAsFQDN: ptr.To(true)}, host: "h.sub.ns.svc.cluster.local"},
		{name: "setHostnameAsFQDN without subdomain", spec: v1.PodSpec{SetHostnameAsFQDN: ptr.To(true)}, host: "web-0"},
		{name: "FQDN too long", spec: v1.PodSpec{Hostname: strings.Repeat("h", 40), Subdomain: "sub", SetHostnameAsFQDN: ptr.To(true)},
			err: "FQDN " + strings.Repeat("h", 40) + ".sub.ns.svc.cluster.local is too long (64 characters is the max, 65 characters requested)"},
		{name: "long name cut to 63 without trailing dash", spec: v1.PodSpec{Hostname: strings.Repeat("a", 62) + "-b"}, host: strings.Repeat("a", 62)},
		{name: "host network has the node's", spec: v1.PodSpec{HostNetwork: true, Hostname: "h"}, host: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "ns", UID: "u"}, Spec: tc.spec}
			sb, err := Sandbox(n, SandboxRequest{Pod: pod})
			if tc.err != "" && err != nil && !strings.HasPrefix(err.Error(), "failed to construct FQDN from pod hostname and cluster domain, ") {
				t.Errorf("err = %q, want kubelet's text from its start (its event and e2e_node match it)", err)
			}
			if erred(t, err, tc.err) {
				return
			}
			if sb.Hostname != tc.host {
				t.Errorf("hostname %q, want %q", sb.Hostname, tc.host)
			}
			if sb.DnsConfig == nil {
				t.Fatal("no DNS config")
			}
		})
	}
	if len(warned) == 0 || !strings.Contains(warned[0], `web-0 MissingClusterDNS: pod: "web-0_ns(u)". kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`) {
		t.Errorf("warnings %q, want MissingClusterDNS for each sandbox", warned)
	}
}
