package podspec

import (
	"fmt"
	"net"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Limits of a resolver configuration, as the API server validates them and
// kubelet applies them.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxDNSSearchLen       = 253
	maxResolvConfBytes    = 10 << 20
)

// DNSWarning is a Warning event about the pod's DNS configuration
// (MissingClusterDNS, DNSConfigForming), as kubelet records them.
type DNSWarning struct {
	Reason, Message string
}

// DNS is the sandbox's resolver configuration, as kubelet's GetPodDNS:
//   - dnsPolicy None: only the pod's dnsConfig;
//   - ClusterFirst (the default; for a hostNetwork pod it means Default)
//     and ClusterFirstWithHostNet: the cluster DNS servers (--cluster-dns),
//     the search path <ns>.svc.<domain>, svc.<domain>, <domain> before the
//     node's searches (--cluster-domain), and options ndots:5; without
//     cluster DNS servers the pod falls back to Default with a
//     MissingClusterDNS warning;
//   - Default: the node's resolver file (--resolv-conf; "" means none:
//     127.0.0.1 and search ".").
//
// The pod's dnsConfig is then appended: nameservers and searches without
// duplicates, options merged by name (the pod's value wins). Nameservers
// beyond 3 and searches beyond kubelet's limits are cut with a
// DNSConfigForming warning.
func DNS(n Node, pod *v1.Pod) (*runtimeapi.DNSConfig, []DNSWarning, error) {
	cfg := &runtimeapi.DNSConfig{}
	if n.ResolvConf != "" {
		data, err := readAtMost(n.ResolvConf, maxResolvConfBytes)
		if err != nil {
			return nil, nil, fmt.Errorf("pod %s/%s: dnsPolicy: read --resolv-conf: %w", pod.Namespace, pod.Name, err)
		}
		cfg.Servers, cfg.Searches, cfg.Options, err = parseResolvConf(data)
		if err != nil {
			return nil, nil, fmt.Errorf("pod %s/%s: dnsPolicy: Encountered error while parsing resolv conf file. Error: %w", pod.Namespace, pod.Name, err)
		}
	}
	var warns []DNSWarning
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	if policy == v1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = v1.DNSDefault
	}
	switch policy {
	case v1.DNSNone:
		cfg = &runtimeapi.DNSConfig{}
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet:
		if len(n.ClusterDNS) > 0 {
			cfg.Servers = append([]string(nil), n.ClusterDNS...)
			if n.ClusterDomain != "" {
				cluster := []string{pod.Namespace + ".svc." + n.ClusterDomain, "svc." + n.ClusterDomain, n.ClusterDomain}
				cfg.Searches = omitDuplicates(append(cluster, cfg.Searches...))
			}
			cfg.Options = []string{"ndots:5"}
			break
		}
		msg := fmt.Sprintf("kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.", v1.DNSClusterFirst, v1.DNSDefault)
		warns = append(warns, DNSWarning{Reason: "MissingClusterDNS", Message: fmt.Sprintf("pod: %q. %s", pod.Name+"_"+pod.Namespace+"("+string(pod.UID)+")", msg)})
		fallthrough
	case v1.DNSDefault:
		if n.ResolvConf == "" {
			cfg.Servers = []string{"127.0.0.1"}
			if ip := net.ParseIP(n.IP); ip != nil && ip.To4() == nil {
				cfg.Servers = []string{"::1"}
			}
			cfg.Searches = []string{"."}
		}
	default:
		return nil, nil, fmt.Errorf("pod %s/%s: dnsPolicy: invalid DNSPolicy=%v", pod.Namespace, pod.Name, pod.Spec.DNSPolicy)
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		cfg.Servers = omitDuplicates(append(cfg.Servers, dc.Nameservers...))
		cfg.Searches = omitDuplicates(append(cfg.Searches, dc.Searches...))
		cfg.Options = mergeDNSOptions(cfg.Options, dc.Options)
	}
	if len(cfg.Servers) > maxDNSNameservers {
		cfg.Servers = cfg.Servers[:maxDNSNameservers]
		warns = append(warns, DNSWarning{Reason: "DNSConfigForming", Message: "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: " + strings.Join(cfg.Servers, " ")})
	}
	var cut bool
	if cfg.Searches, cut = searchFitsLimits(cfg.Searches); cut {
		warns = append(warns, DNSWarning{Reason: "DNSConfigForming", Message: "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(cfg.Searches, " ")})
	}
	return cfg, warns, nil
}

// searchFitsLimits cuts the search list to 32 paths of at most 253
// characters, 2048 characters in all (dropping from the end).
func searchFitsLimits(search []string) ([]string, bool) {
	cut := false
	if len(search) > maxDNSSearchPaths {
		search, cut = search[:maxDNSSearchPaths], true
	}
	kept := search[:0:0]
	for _, s := range search {
		if len(s) > maxDNSSearchLen {
			cut = true
			continue
		}
		kept = append(kept, s)
	}
	for len(kept) > 0 && len(strings.Join(kept, " ")) > maxDNSSearchListChars {
		kept, cut = kept[:len(kept)-1], true
	}
	return kept, cut
}

func omitDuplicates(in []string) []string {
	seen := make(map[string]bool, len(in))
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// mergeDNSOptions merges the pod's options into existing ones by name (a
// later value wins); "name:value", or "name" without a value. The order is
// that of first appearance.
func mergeDNSOptions(existing []string, pod []v1.PodDNSConfigOption) []string {
	var names []string
	vals := map[string]string{}
	set := func(name, val string) {
		if _, ok := vals[name]; !ok {
			names = append(names, name)
		}
		vals[name] = val
	}
	for _, op := range existing {
		name, val, _ := strings.Cut(op, ":")
		set(name, val)
	}
	for _, op := range pod {
		val := ""
		if op.Value != nil {
			val = *op.Value
		}
		set(op.Name, val)
	}
	out := []string{}
	for _, name := range names {
		if vals[name] != "" {
			out = append(out, name+":"+vals[name])
		} else {
			out = append(out, name)
		}
	}
	return out
}

// parseResolvConf reads nameservers, the last search line (without "."
// and trailing dots) and options (a later option of a name replaces an
// earlier one) from a resolv.conf, as kubelet's parseResolvConf.
func parseResolvConf(data []byte) (servers, searches, options []string, err error) {
	servers, searches, options = []string{}, []string{}, []string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) < 2 {
				err = fmt.Errorf("nameserver list is empty ")
				continue
			}
			servers = append(servers, f[1])
		case "search":
			searches = []string{}
			for _, s := range f[1:] {
				if s != "." {
					searches = append(searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			for _, op := range f[1:] {
				name, _, _ := strings.Cut(op, ":")
				replaced := false
				for i, old := range options {
					if o, _, _ := strings.Cut(old, ":"); o == name {
						options[i], replaced = op, true
					}
				}
				if !replaced {
					options = append(options, op)
				}
			}
		}
	}
	return servers, searches, options, err
}

func readAtMost(path string, limit int) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return data, nil
}
