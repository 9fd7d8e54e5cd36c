package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/speclet/speclet/cri/harness"
)

// restartPaths are the kubelet API's requests asked through a restart,
// each with the check of a 200 answer's body.
var restartPaths = map[string]func([]byte) error{
	"/configz": func(b []byte) error {
		var v struct {
			KC struct {
				Kind string `json:"kind"`
			} `json:"kubeletconfig"`
		}
		if err := json.Unmarshal(b, &v); err != nil || v.KC.Kind != "KubeletConfiguration" {
			return fmt.Errorf("not a KubeletConfiguration (%v): %.200s", err, b)
		}
		return nil
	},
	"/stats/summary": func(b []byte) error {
		var s statsapi.Summary
		if err := json.Unmarshal(b, &s); err != nil || s.Node.NodeName != "n1" {
			return fmt.Errorf("not node n1's summary (%v): %.200s", err, b)
		}
		return nil
	},
	"/metrics/resource": func(b []byte) error {
		if !bytes.Contains(b, []byte("node_cpu_usage_seconds_total")) && !bytes.Contains(b, []byte("scrape_error")) {
			return fmt.Errorf("no resource metrics: %.200s", b)
		}
		return nil
	},
}

// TestKubeletAPIThroughRestarts asks /configz, /stats/summary and
// /metrics/resource without pause while the daemon starts (its engine not
// yet running, then rebuilding its state), runs a pod, stops, and starts
// again on the same root dir: every request is answered with a well-formed
// 200, refused with an error status and a message, or its connection is
// refused or closed. None hangs (each has 30 s), no handler panics, and
// the daemon stops every time.
func TestKubeletAPIThroughRestarts(t *testing.T) {
	dir := t.TempDir()
	manifests := filepath.Join(dir, "pods")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: main, image: 'busybox:latest'}]\n"
	if err := os.WriteFile(filepath.Join(manifests, "web.yaml"), []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	port, roPort := harness.FreePort(t), harness.FreePort(t)
	o, err := parseRunFlags([]string{"--runtime=sim", "--root-dir", filepath.Join(dir, "root"), "--pod-manifest-path", manifests,
		"--node-name", "n1", "--read-only-port", fmt.Sprint(roPort), "--healthz-port", "0", "--port", fmt.Sprint(port), "--anonymous-auth"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// net/http logs a handler's panic through the standard logger
	var stdlog syncBuffer
	log.SetOutput(&stdlog)
	defer log.SetOutput(os.Stderr)

	client := &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var mu sync.Mutex
	ok := map[string]int{}       // 200s by path, in this run
	outcomes := map[string]int{} // every kind of answer, for the log
	var problems []string        // answers that are neither
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for path, check := range restartPaths {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					kind, problem := askOnce(client, fmt.Sprintf("https://127.0.0.1:%d%s", port, path), check)
					mu.Lock()
					outcomes[path+" "+kind]++
					if kind == "200" {
						ok[path]++
					}
					if problem != "" && len(problems) < 20 {
						problems = append(problems, path+": "+problem)
					}
					mu.Unlock()
					if kind == "refused" {
						time.Sleep(5 * time.Millisecond) // nothing listens yet, or any more
					}
				}
			}()
		}
	}
	defer func() {
		close(stop)
		wg.Wait()
		t.Logf("answers through the restarts: %v", outcomes)
		for _, p := range problems {
			t.Error(p)
		}
		if s := stdlog.String(); strings.Contains(s, "panic") {
			t.Errorf("a handler panicked:\n%s", s)
		}
	}()

	for run := 1; run <= 2; run++ {
		mu.Lock()
		clear(ok)
		mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		var logs syncBuffer
		done := make(chan error, 1)
		go func() { done <- runDaemon(ctx, o, &logs) }()
		// bounded wait: the pod runs and every path answered 200 at least once
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			body, _ := httpGet(fmt.Sprintf("http://127.0.0.1:%d/pods", roPort))
			mu.Lock()
			all, seen := len(ok) == len(restartPaths), fmt.Sprint(ok)
			mu.Unlock()
			if all && bytes.Contains(body, []byte(`"phase":"Running"`)) {
				break
			}
			if time.Now().After(deadline) {
				cancel()
				<-done
				t.Fatalf("run %d: within 60s the pod did not run or a path never answered 200 (%s); log:\n%s", run, seen, logs.String())
			}
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run %d: runDaemon after cancel = %v, want nil", run, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d: runDaemon did not return within 30s of cancel, with requests in flight", run)
		}
	}
}

// askOnce GETs url once: the kind of answer (200, another status, refused,
// closed) and, when it is none a restart may give, why.
func askOnce(client *http.Client, url string, check func([]byte) error) (kind, problem string) {
	resp, err := client.Get(url)
	if err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return "timeout", "no answer within 30s: " + err.Error()
		case errors.Is(err, syscall.ECONNREFUSED):
			return "refused", ""
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
			strings.Contains(err.Error(), "server closed") || strings.Contains(err.Error(), "connection reset"):
			return "closed", ""
		}
		return "error", err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "closed", "" // the server shut down mid-body
	}
	if resp.StatusCode == http.StatusOK {
		if err := check(body); err != nil {
			return "200", err.Error()
		}
		return "200", ""
	}
	kind = fmt.Sprint(resp.StatusCode)
	if resp.StatusCode < 500 || len(bytes.TrimSpace(body)) == 0 {
		return kind, fmt.Sprintf("%s with body %q: neither an answer nor a refusal that says why", resp.Status, body)
	}
	return kind, ""
}
