package podspec

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestServiceEnv(t *testing.T) {
	svc := func(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
	}
	api := svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP})
	fooservice := svc("ns", "fooservice", "10.0.0.7", v1.ServicePort{Port: 8765}, v1.ServicePort{Name: "dns-udp", Port: 53, Protocol: v1.ProtocolUDP})
	all := []*v1.Service{api, fooservice,
		svc("ns", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
		svc("other", "elsewhere", "10.0.0.9", v1.ServicePort{Port: 80})}
	apiVars := map[string]string{
		"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
		"KUBERNETES_PORT_443_TCP_PORT": "443", "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
	}
	fooVars := map[string]string{
		"FOOSERVICE_SERVICE_HOST": "10.0.0.7", "FOOSERVICE_SERVICE_PORT": "8765", "FOOSERVICE_SERVICE_PORT_DNS_UDP": "53",
		"FOOSERVICE_PORT": "tcp://10.0.0.7:8765", "FOOSERVICE_PORT_8765_TCP": "tcp://10.0.0.7:8765", "FOOSERVICE_PORT_8765_TCP_PROTO": "tcp",
		"FOOSERVICE_PORT_8765_TCP_PORT": "8765", "FOOSERVICE_PORT_8765_TCP_ADDR": "10.0.0.7",
		"FOOSERVICE_PORT_53_UDP": "udp://10.0.0.7:53", "FOOSERVICE_PORT_53_UDP_PROTO": "udp", "FOOSERVICE_PORT_53_UDP_PORT": "53", "FOOSERVICE_PORT_53_UDP_ADDR": "10.0.0.7",
	}
	merged := map[string]string{}
	for _, m := range []map[string]string{apiVars, fooVars} {
		for k, v := range m {
			merged[k] = v
		}
	}
	for _, tc := range []struct {
		name  string
		links *bool
		want  map[string]string
	}{
		{"service links by default", nil, merged},
		{"enableServiceLinks true", ptr.To(true), merged},
		{"enableServiceLinks false keeps the API server's", ptr.To(false), apiVars},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ServiceEnv(all, "ns", tc.links); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
	if got := ServiceEnv(nil, "ns", nil); len(got) != 0 {
		t.Errorf("no services: %v", got)
	}
}
