package podspec

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ServiceEnv are the service variables of a pod in namespace ns, as
// kubelet's getServiceEnvVarMap builds them from the cluster's services:
// the API server's own service (default/kubernetes) always, and with
// enableServiceLinks (default true) every service of ns that has a
// cluster IP: <NAME>_SERVICE_HOST, <NAME>_SERVICE_PORT, one
// <NAME>_SERVICE_PORT_<PORT NAME> per named port, and the Docker link
// variables <NAME>_PORT and <NAME>_PORT_<port>_<PROTO>{,_PROTO,_PORT,_ADDR}
// (names upper-cased, '-' as '_').
func ServiceEnv(services []*v1.Service, ns string, enableServiceLinks *bool) map[string]string {
	links := enableServiceLinks == nil || *enableServiceLinks
	chosen := map[string]*v1.Service{}
	for _, s := range services {
		if !serviceIPSet(s) {
			continue
		}
		switch {
		case s.Namespace == v1.NamespaceDefault && s.Name == "kubernetes":
			if _, ok := chosen[s.Name]; !ok {
				chosen[s.Name] = s
			}
		case s.Namespace == ns && links:
			chosen[s.Name] = s
		}
	}
	env := map[string]string{}
	for _, s := range chosen {
		prefix := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
		env[prefix+"_SERVICE_HOST"] = s.Spec.ClusterIP
		env[prefix+"_SERVICE_PORT"] = strconv.Itoa(int(s.Spec.Ports[0].Port))
		for i, p := range s.Spec.Ports {
			if p.Name != "" {
				env[prefix+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))] = strconv.Itoa(int(p.Port))
			}
			proto := string(v1.ProtocolTCP)
			if p.Protocol != "" {
				proto = string(p.Protocol)
			}
			url := strings.ToLower(proto) + "://" + net.JoinHostPort(s.Spec.ClusterIP, strconv.Itoa(int(p.Port)))
			if i == 0 {
				env[prefix+"_PORT"] = url
			}
			pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
			env[pp] = url
			env[pp+"_PROTO"] = strings.ToLower(proto)
			env[pp+"_PORT"] = strconv.Itoa(int(p.Port))
			env[pp+"_ADDR"] = s.Spec.ClusterIP
		}
	}
	return env
}

// serviceIPSet: the service has a cluster IP (not headless, not
// ExternalName) and a port.
func serviceIPSet(s *v1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != v1.ClusterIPNone && len(s.Spec.Ports) > 0
}
