package kubeletapi_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/engine/kubeletapi"
	"github.com/speclet/speclet/engine/server"
)

// streamHost is a node with one pod, default/p, of one container, main.
type streamHost struct{}

func (streamHost) Pods() []*v1.Pod {
	return []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main"}}}}}
}
func (streamHost) Healthz() error { return nil }

// streamRuntime runs main with its log at logPath; Exec answers execURL.
type streamRuntime struct {
	kubeletapi.Runtime // the calls the test does not make
	logPath, execURL   string
}

func (r *streamRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return []*runtimeapi.Container{{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 1}}, nil
}
func (r *streamRuntime) ContainerStatus(context.Context, string) (*runtimeapi.ContainerStatus, error) {
	return &runtimeapi.ContainerStatus{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, LogPath: r.logPath}, nil
}
func (r *streamRuntime) Exec(context.Context, *runtimeapi.ExecRequest) (string, error) {
	return r.execURL, nil
}

// TestStreamsOutliveServerTimeouts serves the API with the server's limits
// at 500 ms (read, write, header, idle): a followed log and an exec session
// each stream for about 2 s and deliver every line, because the streaming
// handlers lift their deadlines and an upgraded connection has none.
func TestStreamsOutliveServerTimeouts(t *testing.T) {
	const ticks = 20
	logPath := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// the runtime's streaming server: upgrades, then writes a tick every 100 ms
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			http.Error(w, "want an upgrade", http.StatusBadRequest)
			return
		}
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + r.Header.Get("Upgrade") + "\r\n\r\n")
		brw.Flush()
		for i := range ticks {
			time.Sleep(100 * time.Millisecond)
			fmt.Fprintf(brw, "tick %d\n", i)
			brw.Flush()
		}
	}))
	defer backend.Close()
	api, err := kubeletapi.New(kubeletapi.Config{Host: streamHost{}, Runtime: &streamRuntime{logPath: logPath, execURL: backend.URL + "/exec/x"},
		NodeName: "node-a", Anonymous: true, Authorizer: kubeletapi.AlwaysAllow{},
		Labels: kubeletapi.Labels{PodUID: "uid", PodName: "name", PodNamespace: "ns", ContainerName: "container"}})
	if err != nil {
		t.Fatal(err)
	}
	cert, _, err := kubeletapi.ServingCert("", "", t.TempDir(), "node-a", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const limit = 500 * time.Millisecond
	srv := server.NewTLS(l, api, api.TLSConfig(cert), server.Limits{ReadHeaderTimeout: limit, ReadTimeout: limit, WriteTimeout: limit, IdleTimeout: limit})
	go srv.Serve()
	defer srv.Close()
	addr := l.Addr().String()

	t.Run("logs follow", func(t *testing.T) {
		go func() {
			f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return
			}
			defer f.Close()
			for i := range ticks {
				time.Sleep(100 * time.Millisecond)
				fmt.Fprintf(f, "%s stdout F tick %d\n", time.Now().UTC().Format(time.RFC3339Nano), i)
			}
		}()
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		resp, err := client.Get("https://" + addr + "/containerLogs/default/p/main?follow=true")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("GET containerLogs: %d %s", resp.StatusCode, b)
		}
		readTicks(t, bufio.NewReader(resp.Body), ticks)
	})

	t.Run("exec", func(t *testing.T) {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /exec/default/p/main?command=sh&stdout=1 HTTP/1.1\r\nHost: node-a\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("exec: %d %s, want 101", resp.StatusCode, b)
		}
		readTicks(t, br, ticks)
	})
}

// readTicks reads lines "tick 0" .. "tick n-1" from r.
func readTicks(t *testing.T, r *bufio.Reader, n int) {
	t.Helper()
	for i := range n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d of %d lines: %v (the stream was cut)", i, n, err)
		}
		if want := fmt.Sprintf("tick %d", i); strings.TrimSpace(line) != want {
			t.Fatalf("line %d: %q, want %q", i, line, want)
		}
	}
}
