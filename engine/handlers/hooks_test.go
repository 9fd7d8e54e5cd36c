package handlers

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestHTTPGetHook: an httpGet hook succeeds on any HTTP answer, a 500
// included (kubelet's runHTTPHandler ignores the status code), and fails,
// naming the URL, when it gets none; a named port is the container's port
// of that name.
func TestHTTPGetHook(t *testing.T) {
	var gotHeader string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader = r.Header.Get("X-Hook")
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusOK)
		case "/moved":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	host, portStr, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portStr)
	spec := &v1.Container{Name: "web", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	target := Target{Name: "web", PodIP: host, Spec: spec}

	for _, tc := range []struct {
		name    string
		action  v1.HTTPGetAction
		wantErr string // "" = success
	}{
		{"200 on a numeric port", v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt32(int32(port)), Host: "127.0.0.1"}, ""},
		{"302 is success", v1.HTTPGetAction{Path: "/moved", Port: intstr.FromInt32(int32(port)), Host: "127.0.0.1"}, ""},
		{"named port, pod IP as host", v1.HTTPGetAction{Path: "ok", Port: intstr.FromString("http")}, ""},
		{"500 is success too", v1.HTTPGetAction{Path: "/broken", Port: intstr.FromInt32(int32(port)), Host: "127.0.0.1"}, ""},
		{"no answer fails", v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt32(int32(closedPort(t))), Host: "127.0.0.1"}, "httpGet http://127.0.0.1:"},
		{"unknown port name", v1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("admin"), Host: "127.0.0.1"}, `port "admin": no container port of that name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotHeader = ""
			h := &v1.LifecycleHandler{HTTPGet: &tc.action}
			tc.action.HTTPHeaders = []v1.HTTPHeader{{Name: "X-Hook", Value: "poststart"}}
			err := target.Hook(context.Background(), "PostStart", h, 0)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("runHook: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("runHook error = %v, want one containing %q", err, tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), `PostStart hook of container "web"`):
				t.Errorf("error %q does not name the hook and the container", err)
			}
			if tc.wantErr == "" && gotHeader != "poststart" {
				t.Errorf("header X-Hook = %q, want the hook's header", gotHeader)
			}
		})
	}
}

// closedPort returns a port on 127.0.0.1 that nothing listens on.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// TestHTTPSHookSkipsVerification: an HTTPS httpGet hook reaches a server
// whose certificate names another host (the pod IP is in none), as
// kubelet's handler runner does; before, the hook failed on the
// certificate (e2e "should execute poststart https hook properly").
func TestHTTPSHookSkipsVerification(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.RawQuery
	}))
	defer srv.Close()
	host, portStr, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portStr)
	target := Target{Name: "web", PodIP: host, Spec: &v1.Container{Name: "web"}}
	h := &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/echo?msg=poststart", Port: intstr.FromInt32(int32(port)), Scheme: v1.URISchemeHTTPS}}
	if err := target.Hook(context.Background(), "PostStart", h, 0); err != nil {
		t.Fatalf("runHook: %v", err)
	}
	if q := <-got; q != "msg=poststart" {
		t.Errorf("query %q, want msg=poststart", q)
	}
}
