package server

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fakeNode struct {
	pods []*v1.Pod
	err  error
}

func (f *fakeNode) Pods() []*v1.Pod { return f.pods }
func (f *fakeNode) Healthz() error  { return f.err }

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(h)
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s.URL
}

func get(t *testing.T, method, url string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func TestServer(t *testing.T) {
	node := &fakeNode{pods: []*v1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "web-n1", Namespace: "default", UID: "u1"},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}}}
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "speclet_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	url := serve(t, Handler(node, reg))

	code, ctype, body := get(t, "GET", url+"/pods")
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); err != nil || code != 200 || ctype != "application/json" {
		t.Fatalf("GET /pods: %d %s %v: %s", code, ctype, err, body)
	}
	if list.Kind != "PodList" || list.APIVersion != "v1" || len(list.Items) != 1 ||
		list.Items[0].Name != "web-n1" || list.Items[0].Status.Phase != v1.PodRunning {
		t.Errorf("GET /pods = %s, want a v1 PodList with web-n1 Running", body)
	}

	node.pods = nil
	if _, _, body := get(t, "GET", url+"/pods"); !strings.Contains(body, `"items":[]`) {
		t.Errorf("GET /pods with no pods = %s, want an empty items list", body)
	}

	if code, _, body := get(t, "GET", url+"/healthz"); code != 200 || body != "ok" {
		t.Errorf("GET /healthz healthy = %d %q, want 200 ok", code, body)
	}
	node.err = errors.New("PLEG is not healthy: last relist 3m1s ago")
	if code, _, body := get(t, "GET", url+"/healthz"); code != 500 || !strings.Contains(body, "PLEG is not healthy") {
		t.Errorf("GET /healthz unhealthy = %d %q, want 500 with the error", code, body)
	}

	if code, _, body := get(t, "GET", url+"/metrics"); code != 200 || !strings.Contains(body, "speclet_test_total 3") {
		t.Errorf("GET /metrics = %d, body without speclet_test_total 3:\n%s", code, body)
	}
	if code, _, _ := get(t, "POST", url+"/pods"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /pods = %d, want 405 (read-only)", code)
	}
	if code, _, _ := get(t, "GET", url+"/nope"); code != 404 {
		t.Errorf("GET /nope = %d, want 404", code)
	}
}

// debugNode is a node that keeps its machines' history.
type debugNode struct {
	fakeNode
	pods map[string]any
}

func (d *debugNode) DebugPods() any { return []string{"web"} }
func (d *debugNode) DebugPod(key string) (any, bool) {
	v, ok := d.pods[key]
	return v, ok
}

// TestDebugPods: a node that keeps history serves /debug/pods and
// /debug/pods/{uid or namespace/name} as JSON, 404 for an unknown pod; a
// node that does not has no /debug.
func TestDebugPods(t *testing.T) {
	url := serve(t, Handler(&debugNode{pods: map[string]any{"u1": map[string]string{"uid": "u1"}, "default/web": map[string]string{"uid": "u1"}}}, nil))
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/debug/pods", 200, `"web"`},
		{"/debug/pods/u1", 200, `"uid": "u1"`},
		{"/debug/pods/default/web", 200, `"uid": "u1"`},
		{"/debug/pods/nope", 404, "no pod nope"},
	} {
		code, ctype, body := get(t, "GET", url+c.path)
		if code != c.code || !strings.Contains(body, c.body) || code == 200 && ctype != "application/json" {
			t.Errorf("GET %s: %d %s %q; want %d with %q", c.path, code, ctype, body, c.code, c.body)
		}
	}
	plain := serve(t, Handler(&fakeNode{}, nil))
	if code, _, _ := get(t, "GET", plain+"/debug/pods"); code != 404 {
		t.Errorf("GET /debug/pods on a node without history: %d, want 404", code)
	}
}

// A flood of connections that send nothing holds at most MaxConns and
// ReserveConns connections of the server; they are closed after
// ReadHeaderTimeout (ReserveTimeout), and /healthz answers.
func TestServerBoundsConnections(t *testing.T) {
	srv, addr := serveLimited(t, Handler(&fakeNode{}, nil), nil, Limits{MaxConns: 6, ReserveConns: 2, ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: 200 * time.Millisecond})
	var flood []net.Conn
	t.Cleanup(func() {
		for _, c := range flood {
			c.Close()
		}
	})
	for i := 0; i < 200; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		flood = append(flood, c)
	}
	maxOpen := 0
	for i := 0; i < 50; i++ {
		maxOpen = max(maxOpen, srv.Open())
		time.Sleep(2 * time.Millisecond)
	}
	if maxOpen > 8 {
		t.Errorf("server held %d connections, limit 6+2", maxOpen)
	}
	// The flood is reaped by the header timeout: /healthz answers.
	drained(t, srv, 200)
	for srv.Open() > 0 {
		time.Sleep(time.Millisecond)
	}
	client := &http.Client{Timeout: time.Minute}
	healthy(t, client, addr) // during the flood
	if n := srv.Open(); n > 8 {
		t.Errorf("open connections %d after the flood, limit 6+2", n)
	}
}

// An idle keep-alive connection is closed by the server after IdleTimeout.
func TestServerClosesIdleConnections(t *testing.T) {
	srv, addr := serveLimited(t, Handler(&fakeNode{}, nil), nil, Limits{IdleTimeout: 100 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(time.Minute)) // a bound, not an assertion
	b, err := io.ReadAll(c)                        // ends when the server closes the idle connection
	if err != nil {
		t.Fatalf("read: %v (the server kept the idle connection open)", err)
	}
	if !strings.Contains(string(b), "200 OK") {
		t.Errorf("response %q", b)
	}
	for deadline := time.Now().Add(10 * time.Second); srv.Open() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // the server counts the close just after it
	}
	if n := srv.Open(); n != 0 {
		t.Errorf("open connections %d after the idle timeout", n)
	}
}
