package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/speclet/speclet/cri/harness"
)

// TestHealthzServer: the healthz server of --healthz-port answers GET and
// HEAD /healthz as the read-only server's /healthz does, and nothing else.
// Its port is taken when the node starts: the node runs anyway, logs the
// failed listen, and serves healthz once the port is free.
func TestHealthzServer(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	hport := taken.Addr().(*net.TCPAddr).Port
	roPort := harness.FreePort(t)
	o, err := parseRunFlags([]string{"--runtime=sim", "--root-dir", t.TempDir(), "--node-name", "n1",
		"--read-only-port", fmt.Sprint(roPort), "--port", "0", "--healthz-port", fmt.Sprint(hport)}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- runDaemon(ctx, o, logs) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	ro := fmt.Sprintf("http://127.0.0.1:%d/healthz", roPort)
	hz := fmt.Sprintf("http://127.0.0.1:%d/healthz", hport)
	// a wait bounded for a failing test
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s; log:\n%s", what, logs.String())
			}
		}
	}
	get := func(method, url string) (int, string, error) {
		req, _ := http.NewRequest(method, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	waitFor("the read-only /healthz never answered ok with the healthz port taken", func() bool {
		code, _, err := get("GET", ro)
		return err == nil && code == http.StatusOK
	})
	waitFor("no error in the log for the taken healthz port", func() bool {
		return strings.Contains(logs.String(), "healthz server: listen failed") && strings.Contains(logs.String(), "address already in use")
	})
	taken.Close()
	waitFor("the healthz server never listened once its port was free", func() bool {
		_, _, err := get("GET", hz)
		return err == nil
	})
	if !strings.Contains(logs.String(), fmt.Sprintf(`msg="healthz server listening" addr=http://127.0.0.1:%d/healthz`, hport)) {
		t.Errorf("the log does not say where the healthz server listens:\n%s", logs.String())
	}
	roCode, roBody, err := get("GET", ro)
	if err != nil {
		t.Fatal(err)
	}
	code, body, err := get("GET", hz)
	if err != nil || code != roCode || body != roBody || code != http.StatusOK || body != "ok" {
		t.Errorf("GET /healthz = %d %q, %v; the read-only server answers %d %q, want both 200 ok", code, body, err, roCode, roBody)
	}
	if code, body, err := get("HEAD", hz); err != nil || code != http.StatusOK || body != "" {
		t.Errorf("HEAD /healthz = %d %q, %v; want 200 without a body", code, body, err)
	}
	for _, r := range []struct {
		method, path string
		want         int
	}{{"GET", "/pods", 404}, {"GET", "/metrics", 404}, {"GET", "/debug/pods", 404}, {"POST", "/healthz", 405}} {
		if code, _, err := get(r.method, fmt.Sprintf("http://127.0.0.1:%d%s", hport, r.path)); err != nil || code != r.want {
			t.Errorf("%s %s on the healthz server = %d, %v; want %d", r.method, r.path, code, err, r.want)
		}
	}
}
