package kubeletapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/criaudit"
	"github.com/speclet/speclet/fsm"
)

// TestContainerd serves the kubelet API of a speclet node on a real
// containerd and uses it as kube-apiserver and kubectl would: logs with each
// parameter, exec (one-shot and interactive, over SPDY), attach,
// port-forward to a busybox httpd on 127.0.0.1, /pods, /runningpods, and the
// refusals (401, 403, 404).
func TestContainerd(t *testing.T) {
	n := startNode(t, onlyUser("admin"), nil)
	port := harness.FreePort(t)
	ticker := n.pod("ticker", v1.Container{Name: "main", Command: []string{"sh", "-c",
		`i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done`}})
	crasher := n.pod("crasher", v1.Container{Name: "main", Command: []string{"sh", "-c",
		`echo run at $(cat /proc/uptime); echo second line; sleep 1; exit 1`}})
	web := n.pod("web", v1.Container{Name: "httpd", Command: []string{"sh", "-c",
		fmt.Sprintf(`mkdir -p /www && echo hello-from-httpd > /www/index.html && exec httpd -f -p 127.0.0.1:%d -h /www`, port)}})
	chat := n.pod("chat", v1.Container{Name: "main", Stdin: true, Command: []string{"sh", "-c",
		`while read l; do echo got:$l; done`}})
	n.updates <- config.PodUpdate{Op: config.OpAdd, Pods: []*v1.Pod{ticker, crasher, web, chat}, Source: config.SourceFile}
	n.waitFor(t, "ticker, web, chat Running; crasher restarted", func() bool {
		return n.allRunning("ticker", "web", "chat") && n.restarts("crasher") >= 1
	})
	admin := n.httpClient(t, "admin")

	t.Run("logs", func(t *testing.T) {
		u := n.base + "/containerLogs/default/ticker/main"
		n.waitFor(t, "five ticks", func() bool { _, b := get(t, admin, u); return strings.Contains(b, "tick 4\n") })
		code, body := get(t, admin, u)
		if code != 200 || !strings.HasPrefix(body, "tick 0\ntick 1\n") {
			t.Errorf("logs: %d %q", code, body)
		}
		_, body = get(t, admin, u+"?tailLines=2")
		if lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "tick ") {
			t.Errorf("tailLines=2: %q", body)
		}
		_, body = get(t, admin, u+"?limitBytes=8")
		if body != "tick 0\nt" {
			t.Errorf("limitBytes=8: %q", body)
		}
		_, body = get(t, admin, u+"?timestamps=true&tailLines=1")
		ts, rest, _ := strings.Cut(body, " ")
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || !strings.HasPrefix(rest, "tick ") {
			t.Errorf("timestamps: %q", body)
		}
		_, body = get(t, admin, u+"?sinceTime="+url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)))
		if body != "" {
			t.Errorf("sinceTime in the future: %q, want nothing", body)
		}
		_, body = get(t, admin, u+"?sinceSeconds=1")
		if strings.Contains(body, "tick 0\n") || !strings.Contains(body, "tick ") {
			t.Errorf("sinceSeconds=1: %q, want recent ticks only", body)
		}
		code, body = get(t, admin, n.base+"/containerLogs/default/ticker/main?tailLines=x")
		if code != 400 || !strings.Contains(body, "tailLines") {
			t.Errorf("tailLines=x: %d %q", code, body)
		}
		// previous: the container before the restart
		_, body = get(t, admin, n.base+"/containerLogs/default/crasher/main?previous=true")
		if !strings.HasPrefix(body, "run at ") || !strings.HasSuffix(body, "second line\n") {
			t.Errorf("previous: %q", body)
		}
		code, body = get(t, admin, n.base+"/containerLogs/default/ticker/main?previous=true")
		if code != 400 || !strings.Contains(body, "no previous container") {
			t.Errorf("previous of a container never restarted: %d %q", code, body)
		}
		// follow: new lines arrive on an open response
		resp, err := admin.Get(u + "?follow=true&tailLines=1")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		seen := map[string]bool{}
		for len(seen) < 3 {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("follow: %v after %v", err, seen)
			}
			seen[line] = true
		}
	})

	t.Run("exec", func(t *testing.T) {
		var out, errb bytes.Buffer
		if err := execIn(n.restConfig(t, "admin"), n.base+"/exec/default/ticker/main?command=sh&command=-c&command=echo+hi&output=1&error=1",
			remotecommand.StreamOptions{Stdout: &out, Stderr: &errb}); err != nil {
			t.Fatalf("exec: %v (stderr %q)", err, errb.String())
		}
		if out.String() != "hi\n" {
			t.Errorf("exec echo hi: stdout %q", out.String())
		}
		// interactive: a shell reads commands from stdin
		out.Reset()
		stdin := strings.NewReader("echo one\necho two >&2\nexit 3\n")
		err := execIn(n.restConfig(t, "admin"), n.base+"/exec/default/ticker/main?command=sh&input=1&output=1&error=1",
			remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Stderr: &errb})
		if out.String() != "one\n" || errb.String() != "two\n" {
			t.Errorf("interactive exec: stdout %q stderr %q", out.String(), errb.String())
		}
		if err == nil || !strings.Contains(err.Error(), "exit code 3") {
			t.Errorf("interactive exec error = %v, want exit code 3", err)
		}
	})

	t.Run("attach", func(t *testing.T) {
		pr, pw := io.Pipe()
		out := &lineWriter{lines: make(chan string, 10)}
		done := make(chan error, 1)
		go func() {
			done <- execIn(n.restConfig(t, "admin"), n.base+"/attach/default/chat/main?input=1&output=1",
				remotecommand.StreamOptions{Stdin: pr, Stdout: out})
		}()
		pw.Write([]byte("hello\n"))
		select {
		case l := <-out.lines:
			if l != "got:hello\n" {
				t.Errorf("attach: %q, want got:hello", l)
			}
		case err := <-done:
			t.Fatalf("attach ended: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("attach: no answer")
		}
		pw.Close()
	})

	t.Run("port-forward", func(t *testing.T) {
		cfg := n.restConfig(t, "admin")
		transport, upgrader, err := spdy.RoundTripperFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(n.base + "/portForward/default/web")
		dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u)
		local := harness.FreePort(t)
		stop, ready := make(chan struct{}), make(chan struct{})
		pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("%d:%d", local, port)}, stop, ready, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- pf.ForwardPorts() }()
		defer func() { close(stop); <-done }()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("port-forward: %v", err)
		}
		if body := n.waitIndex(t, "httpd answers through the forward", local); body != "hello-from-httpd\n" {
			t.Errorf("port-forward GET: %q", body)
		}
	})

	t.Run("pods", func(t *testing.T) {
		code, body := get(t, admin, n.base+"/pods")
		var list v1.PodList
		if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Items) != 4 {
			t.Errorf("/pods: %d, %d pods", code, len(list.Items))
		}
		code, body = get(t, admin, n.base+"/runningpods/")
		list = v1.PodList{}
		if code != 200 || json.Unmarshal([]byte(body), &list) != nil {
			t.Fatalf("/runningpods/: %d %q", code, body)
		}
		names := map[string]bool{}
		for _, p := range list.Items {
			names[p.Namespace+"/"+p.Name] = true
		}
		for _, want := range []string{"default/ticker", "default/web", "default/chat"} {
			if !names[want] {
				t.Errorf("/runningpods/ lacks %s: %v", want, names)
			}
		}
	})

	t.Run("stats", func(t *testing.T) {
		code, body := get(t, admin, n.base+"/stats/summary")
		var s statsapi.Summary
		if code != 200 || json.Unmarshal([]byte(body), &s) != nil {
			t.Fatalf("/stats/summary: %d %q", code, body)
		}
		if s.Node.NodeName != "node-a" || s.Node.CPU == nil || s.Node.CPU.UsageCoreNanoSeconds == nil || s.Node.Memory == nil ||
			s.Node.Memory.WorkingSetBytes == nil || *s.Node.Memory.WorkingSetBytes == 0 || s.Node.Fs == nil || *s.Node.Fs.CapacityBytes == 0 {
			t.Errorf("node stats: %s", body)
		}
		var ticker *statsapi.PodStats
		for i, p := range s.Pods {
			if p.PodRef.Name == "ticker" && p.PodRef.Namespace == "default" && p.PodRef.UID == "ticker-uid" {
				ticker = &s.Pods[i]
			}
		}
		if ticker == nil || len(ticker.Containers) != 1 || ticker.Containers[0].Name != "main" {
			t.Fatalf("no ticker pod with container main in %s", body)
		}
		c := ticker.Containers[0]
		if c.CPU == nil || c.CPU.UsageCoreNanoSeconds == nil || *c.CPU.UsageCoreNanoSeconds == 0 ||
			c.Memory == nil || c.Memory.WorkingSetBytes == nil || *c.Memory.WorkingSetBytes == 0 {
			t.Errorf("ticker/main has no CPU or memory usage: %s", body)
		}
		if ticker.CPU == nil || ticker.Memory == nil {
			t.Errorf("ticker pod has no CPU or memory: %s", body)
		}
		code, body = get(t, admin, n.base+"/metrics/cadvisor")
		if want := `container_cpu_usage_seconds_total{container="main",cpu="total",`; code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics/cadvisor lacks %q: %d", want, code)
		}
		code, body = get(t, admin, n.base+"/metrics/resource")
		for _, want := range []string{`container_cpu_usage_seconds_total{container="main",namespace="default",pod="ticker"} `,
			`container_memory_working_set_bytes{container="main",namespace="default",pod="ticker"} `,
			`pod_cpu_usage_seconds_total{namespace="default",pod="ticker"} `, "node_cpu_usage_seconds_total ", "node_memory_working_set_bytes ", "resource_scrape_error 0"} {
			if code != 200 || !strings.Contains(body, "\n"+want) {
				t.Errorf("/metrics/resource lacks %q: %d\n%s", want, code, body)
			}
		}
	})

	t.Run("run", func(t *testing.T) {
		resp, err := admin.Post(n.base+"/run/default/ticker/main?cmd=echo+ran", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ran\n" {
			t.Errorf("/run echo ran: %d %q", resp.StatusCode, b)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		for _, tc := range []struct {
			client *http.Client
			path   string
			code   int
			body   string
		}{
			{n.httpClient(t, ""), "/pods", 401, "Unauthorized"},
			{n.httpClient(t, ""), "/containerLogs/default/ticker/main", 401, "Unauthorized"},
			{n.httpClient(t, "bob"), "/containerLogs/default/ticker/main", 403, "user=bob"},
			{n.httpClient(t, "bob"), "/stats/summary", 403, "stats"},
			{admin, "/containerLogs/default/elsewhere/main", 404, "not found on node node-a"},
			{admin, "/containerLogs/default/ticker/nosuch", 404, `container "nosuch" not found`},
			{admin, "/exec/other/ticker/main?command=true&output=1", 404, "not found on node"},
		} {
			code, body := get(t, tc.client, n.base+tc.path)
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Errorf("GET %s: %d %q, want %d with %q", tc.path, code, body, tc.code, tc.body)
			}
		}
		// a certificate from another CA is no credential
		other := &node{ca: newCA(t), server: n.server, base: n.base}
		if code, _ := get(t, other.httpClient(t, "admin"), n.base+"/pods"); code != 401 {
			t.Errorf("certificate of another CA: %d, want 401", code)
		}
	})

	// Every CRI call of the routes above ran under its handler of
	// spec/callers.hcl, within its cri list, and every method a handler
	// declares was called.
	t.Run("audit", func(t *testing.T) {
		checkCallerAudit(t, n.apiCalls.Records(), fsm.KubeletApiCallerName)
	})
}

// checkCallerAudit fails t unless every record was made under a handler of
// caller, the records break no declaration of spec/callers.hcl
// (criaudit.Check), and every method caller's handlers declare was called.
func checkCallerAudit(t *testing.T, recs []criaudit.Record, caller string) {
	t.Helper()
	if len(recs) == 0 {
		t.Fatal("no CRI call recorded")
	}
	stray := map[string]int{}
	for _, r := range recs {
		if r.Machine != caller {
			stray[r.Machine+"/"+r.Action+" "+r.Method]++
		}
	}
	if len(stray) > 0 {
		t.Errorf("CRI calls outside the handlers of %s (tag and method: count): %v", caller, stray)
	}
	if v := criaudit.Check(recs); len(v) > 0 {
		t.Errorf("CRI audit: %d violations of spec/callers.hcl:\n%s", len(v), criaudit.FormatViolations(v))
	}
	var decl []criaudit.Triple
	for _, d := range criaudit.DeclaredHandlers() {
		if d.Machine == caller {
			decl = append(decl, d)
		}
	}
	if u := criaudit.Unseen(recs, decl); len(u) > 0 {
		t.Errorf("declared in spec/callers.hcl, never called:\n%s", criaudit.FormatUnseen(u))
	}
}
