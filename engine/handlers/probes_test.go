package handlers

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The network probe handlers against servers on loopback: httpGet (status
// codes, redirects, headers, port by name), tcpSocket and grpc health.
func TestProbeHandlers(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Probe") != "yes" || !strings.HasPrefix(r.UserAgent(), "kube-probe/") {
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("broken"))
	})
	mux.HandleFunc("/same", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/fail", http.StatusFound) })
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:1/elsewhere", http.StatusFound)
	})
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux}
	go func() { _ = hs.Serve(hl) }()
	t.Cleanup(func() { _ = hs.Close() })
	hport := int32(hl.Addr().(*net.TCPAddr).Port)

	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	hsrv := health.NewServer()
	hsrv.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hsrv.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(gs, hsrv)
	go func() { _ = gs.Serve(gl) }()
	t.Cleanup(gs.Stop)
	gport := int32(gl.Addr().(*net.TCPAddr).Port)

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cport := int32(closed.Addr().(*net.TCPAddr).Port)
	_ = closed.Close()

	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(tlsSrv.Close)
	tlsPort := int32(tlsSrv.Listener.Addr().(*net.TCPAddr).Port)

	target := Target{PodIP: "127.0.0.1", Spec: &v1.Container{Ports: []v1.ContainerPort{{Name: "http", ContainerPort: hport}}}}
	httpGet := func(path string, port intstr.IntOrString) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: port,
			HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "yes"}}}}}
	}
	down := "down"
	for _, tc := range []struct {
		name    string
		probe   *v1.Probe
		ok      bool
		warning string
		errHas  string
	}{
		{name: "http by number", probe: httpGet("/ok", intstr.FromInt32(hport)), ok: true},
		{name: "http by name", probe: httpGet("ok", intstr.FromString("http")), ok: true},
		{name: "https self-signed", probe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Scheme: v1.URISchemeHTTPS, Port: intstr.FromInt32(tlsPort)}}}, ok: true},
		{name: "http 500", probe: httpGet("/fail", intstr.FromInt32(hport)), errHas: "statuscode: 500"},
		{name: "http redirect same host followed", probe: httpGet("/same", intstr.FromInt32(hport)), errHas: "statuscode: 500"},
		{name: "http redirect elsewhere", probe: httpGet("/away", intstr.FromInt32(hport)), ok: true, warning: "Probe terminated redirects"},
		{name: "http unknown port name", probe: httpGet("/ok", intstr.FromString("nope")), errHas: "no container port"},
		{name: "tcp open", probe: &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(hport)}}}, ok: true},
		{name: "tcp closed", probe: &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(cport)}}}, errHas: "refused"},
		{name: "grpc serving", probe: &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: gport}}}, ok: true},
		{name: "grpc not serving", probe: &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: gport, Service: &down}}}, errHas: "NOT_SERVING"},
		{name: "grpc closed", probe: &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: cport}}}, errHas: "failed to connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := target.Probe(context.Background(), tc.probe, time.Duration(max(tc.probe.TimeoutSeconds, 1))*time.Second)
			if tc.ok != (err == nil) {
				t.Fatalf("runProbe: output %q, err %v; want success %t", out, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("err %v, want it to contain %q", err, tc.errHas)
			}
			if tc.ok && out != tc.warning {
				t.Errorf("output %q, want warning %q", out, tc.warning)
			}
		})
	}
}
