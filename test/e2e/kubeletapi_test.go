package e2e

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestKubeletAPI reads a pod through the daemon's kubelet API (--port,
// anonymous, authorized by AlwaysAllow): its log, a command run in it
// (/run), the running pods and the stats summary. The daemon hands the API
// the runtime the engine calls, so TestMain's CRI audit holds these calls
// to their handlers in spec/callers.hcl.
func TestKubeletAPI(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "api")
	d.writeManifest(t, "api", podSpec{name: "api", grace: 1, containers: []ctr{{name: "main", command: "echo hello from api; " + handlesTERM}}}.yaml(c))
	p := d.waitPod(t, "api", 2*time.Minute, "Running", isRunning)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	call := func(method, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, d.apiBase+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	pod := "/default/" + p.Name
	deadline := time.Now().Add(time.Minute)
	for {
		code, body := call("GET", "/containerLogs"+pod+"/main")
		if code == 200 && body == "hello from api\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /containerLogs%s/main: %d %q, want the pod's one line", pod, code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code, body := call("POST", "/run"+pod+"/main?cmd=echo+ran"); code != 200 || body != "ran\n" {
		t.Errorf("POST /run%s/main echo ran: %d %q", pod, code, body)
	}
	for _, path := range []string{"/runningpods/", "/stats/summary"} {
		if code, body := call("GET", path); code != 200 || !strings.Contains(body, `"name":"`+p.Name+`"`) {
			t.Errorf("GET %s: %d, want 200 naming %s: %.300s", path, code, p.Name, body)
		}
	}
}
