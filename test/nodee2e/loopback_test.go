package nodee2e

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestLoopbackForward: a request to loopback's port reaches the target and
// its answer comes back; stop ends the open (keep-alive) connection, the
// forwarder answers nothing and the port is free again.
func TestLoopbackForward(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "served "+r.URL.Path)
	}))
	defer target.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	stop, err := loopbackForward(port, target.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loopbackForward(port, target.Listener.Addr().String()); err == nil || !strings.Contains(err.Error(), "127.0.0.1:") {
		t.Errorf("a second forwarder on the same port: %v, want an error naming it", err)
	}
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/metrics/cadvisor"
	for i := 0; i < 3; i++ { // keep-alive and fresh connections alike
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s through the forwarder: %v", url, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "served /metrics/cadvisor" {
			t.Fatalf("GET %s: %q", url, b)
		}
	}
	stop()
	if _, err := http.Get(url); err == nil {
		t.Errorf("GET %s after stop: no error", url)
	}
	again, err := loopbackForward(port, target.Listener.Addr().String())
	if err != nil {
		t.Fatalf("the port after stop: %v", err)
	}
	again()
}
