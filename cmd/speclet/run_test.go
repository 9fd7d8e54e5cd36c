package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/criaudit"
)

func TestRunFlagsDefaults(t *testing.T) {
	o, err := parseRunFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.endpoint != "unix:///run/containerd/containerd.sock" || o.runtime != "remote" || o.rootDir != "/var/lib/speclet" ||
		o.address != "127.0.0.1" || o.readOnlyPort != 10255 || o.healthzBindAddress != "127.0.0.1" || o.healthzPort != 10248 || o.syncFrequency != time.Minute ||
		o.crashLoopBackOffBase != 10*time.Second || o.requestTimeout != 2*time.Minute || o.httpCheckFrequency != 20*time.Second {
		t.Errorf("defaults = %+v, want kubelet's", *o)
	}
	if o.nodeName == "" {
		t.Error("--node-name defaults to empty, want the hostname")
	}
}

func TestRunFlagsParse(t *testing.T) {
	o, err := parseRunFlags(strings.Fields("--runtime=sim --pod-manifest-path /etc/pods --manifest-url http://127.0.0.1:8080/pods "+
		"--node-name n1 --root-dir /tmp/x --address 0.0.0.0 --read-only-port 0 --sync-frequency 10s --crashloop-backoff-base 1s -v 4"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.runtime != "sim" || o.manifestPath != "/etc/pods" || o.manifestURL != "http://127.0.0.1:8080/pods" || o.nodeName != "n1" ||
		o.rootDir != "/tmp/x" || o.address != "0.0.0.0" || o.readOnlyPort != 0 || o.syncFrequency != 10*time.Second ||
		o.crashLoopBackOffBase != time.Second || o.verbosity != 4 {
		t.Errorf("parsed %+v", *o)
	}
}

// TestReadOnlyAddress: the read-only server of a node joined to a cluster
// listens on 127.0.0.1, not on its --address; a standalone node's on
// --address; --read-only-address chooses in both cases.
func TestReadOnlyAddress(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"", "127.0.0.1"},
		{"--address 0.0.0.0", "0.0.0.0"},
		{"--address 10.1.2.3 --kubeconfig /k", "127.0.0.1"},
		{"--address 10.1.2.3 --kubeconfig /k --read-only-address 10.1.2.3", "10.1.2.3"},
		{"--address 0.0.0.0 --read-only-address ::1", "::1"},
	} {
		o, err := parseRunFlags(strings.Fields(tc.args), io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if got, _ := o.readOnlyAddr(); got != tc.want {
			t.Errorf("%q: the read-only server listens on %s, want %s", tc.args, got, tc.want)
		}
	}
}

// TestRunFlagsContainerGC: --maximum-dead-containers reaches the engine's
// policy (-1, the default: no node-wide limit), beside the per-container
// limit and the minimum age.
func TestRunFlagsContainerGC(t *testing.T) {
	o, err := parseRunFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p := o.containerGC(); p.MaxContainers != nil || p.MaxPerContainer != 1 || p.MinAge != 0 {
		t.Errorf("default container GC policy %+v, want no node-wide limit, 1 per container, no minimum age", p)
	}
	o, err = parseRunFlags(strings.Fields("--maximum-dead-containers 0 --maximum-dead-containers-per-container 2 --max-pods 20 --minimum-container-ttl-duration 1m"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p := o.containerGC(); p.MaxContainers == nil || *p.MaxContainers != 0 || p.MaxPerContainer != 2 || p.MinAge != time.Minute {
		t.Errorf("container GC policy %+v, want node-wide 0, 2 per container, minimum age 1m", p)
	}
	// kubelet's common --max-pods 250 fits: ListContainers is split by
	// sandbox when its whole reply is over the CRI message limit
	// (cri/split.go), so only one pod's records must fit a message.
	for _, args := range []string{"--max-pods 250", "--max-pods 250 --maximum-dead-containers-per-container 5", "--max-pods 1365 --maximum-dead-containers-per-container 226"} {
		if _, err := parseRunFlags(strings.Fields(args), io.Discard); err != nil {
			t.Errorf("%s: %v", args, err)
		}
	}
}

// TestRunDNSFlags: --cluster-dns repeats and takes comma lists, as
// kubelet's; --resolv-conf defaults to /etc/resolv.conf and may be empty.
func TestRunDNSFlags(t *testing.T) {
	o, err := parseRunFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.clusterDNS) != 0 || o.clusterDomain != "" || o.resolvConf != "/etc/resolv.conf" {
		t.Errorf("defaults: cluster DNS %v, domain %q, resolv.conf %q; want none, \"\", /etc/resolv.conf", o.clusterDNS, o.clusterDomain, o.resolvConf)
	}
	o, err = parseRunFlags([]string{"--cluster-dns", "10.96.0.10,fd00::a", "--cluster-dns=10.96.0.11", "--cluster-domain", "cluster.local", "--resolv-conf="}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.clusterDNS, " "); got != "10.96.0.10 fd00::a 10.96.0.11" || o.clusterDomain != "cluster.local" || o.resolvConf != "" {
		t.Errorf("cluster DNS %q, domain %q, resolv.conf %q", got, o.clusterDomain, o.resolvConf)
	}
}

// TestRunKubeconfigErrorNamesTheFlag: a kubeconfig that cannot be read is an
// error at start naming --kubeconfig.
func TestRunKubeconfigErrorNamesTheFlag(t *testing.T) {
	o, err := parseRunFlags([]string{"--kubeconfig", filepath.Join(t.TempDir(), "missing"), "--node-ip", "127.0.0.1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.nodeIP != "127.0.0.1" {
		t.Errorf("--node-ip 127.0.0.1 parsed as %q; a loopback node IP is accepted", o.nodeIP)
	}
	if _, err := newAPIClient(o); err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("newAPIClient with a missing kubeconfig: %v, want an error naming --kubeconfig", err)
	}
}

// TestRunAuthorizationDefaults: with --kubeconfig the kubelet API authorizes
// through the API server (Webhook) and refuses anonymous callers unless a
// flag says otherwise; without it, AlwaysAllow (there is nothing to ask).
func TestRunAuthorizationDefaults(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	for _, tc := range []struct {
		args      string
		mode      string
		anonymous bool
	}{
		{"", "AlwaysAllow", false},
		{"--kubeconfig " + kc, "Webhook", false},
		{"--kubeconfig " + kc + " --authorization-mode=AlwaysAllow", "AlwaysAllow", false},
		{"--kubeconfig " + kc + " --anonymous-auth=true", "Webhook", true},
		{"--authorization-mode AlwaysAllow", "AlwaysAllow", false},
	} {
		o, err := parseRunFlags(strings.Fields(tc.args), io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if o.authorizationMode != tc.mode || o.anonymousAuth != tc.anonymous {
			t.Errorf("%q: authorization %s, anonymous %v; want %s, %v", tc.args, o.authorizationMode, o.anonymousAuth, tc.mode, tc.anonymous)
		}
	}
}

func TestRunFlagErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--runtime=docker", `--runtime: "docker": want remote or sim`},
		{"--container-runtime-endpoint tcp://1.2.3.4:1", "--container-runtime-endpoint"},
		{"--node-name Bad_Name", "--node-name"},
		{"--address localhost", `--address: "localhost" is not an IP address`},
		{"--read-only-port 70000", "--read-only-port: 70000"},
		{"--read-only-address ::1:10255", `--read-only-address: "::1:10255" is not an IP address`},
		{"--healthz-bind-address localhost", `--healthz-bind-address: "localhost" is not an IP address`},
		{"--healthz-port 65536", "--healthz-port: 65536: want 0..65535"},
		{"--port -1", "--port: -1"},
		{"--container-log-max-size lots", `--container-log-max-size: "lots"`},
		{"--container-log-max-size 0", "--container-log-max-size"},
		{"--container-log-max-files 1", "--container-log-max-files: 1: want 2 or more"},
		{"--tls-cert-file /x.crt", "--tls-cert-file and --tls-private-key-file: give both"},
		{"--authorization-mode Webhook", "--authorization-mode=Webhook: needs --kubeconfig"},
		{"--authorization-mode RBAC", `--authorization-mode: "RBAC"`},
		{"--rotate-server-certificates", "--rotate-server-certificates: needs --kubeconfig"},
		{"--rotate-server-certificates --kubeconfig /k --tls-cert-file /x.crt --tls-private-key-file /x.key", "--rotate-server-certificates and --tls-cert-file: give one"},
		{"--authentication-token-webhook-cache-ttl -1s", "--authentication-token-webhook-cache-ttl: -1s"},
		{"--authorization-webhook-cache-authorized-ttl -1s", "--authorization-webhook-cache-authorized-ttl: -1s"},
		{"--authorization-webhook-cache-unauthorized-ttl -1s", "--authorization-webhook-cache-unauthorized-ttl: -1s"},
		{"--sync-frequency 0s", "--sync-frequency: 0s: want a positive duration"},
		{"--crashloop-backoff-base soon", "crashloop-backoff-base"},
		{"--manifest-url ftp://x/pods", "--manifest-url"},
		{"--log-format xml", "--log-format"},
		{"--max-pods 0", "--max-pods"},
		{"--allowed-unsafe-sysctls kernel.msg*,vm.swappiness", `--allowed-unsafe-sysctls: the sysctls "vm.swappiness" are not known to be namespaced`},
		{"--kube-api-qps 0", "--kube-api-qps: 0"},
		{"--kube-api-burst -1", "--kube-api-burst: -1"},
		{"--node-lease-duration-seconds 0", "--node-lease-duration-seconds: 0"},
		{"--event-qps 0", "--event-qps: 0"},
		{"--node-status-update-frequency 0s", "--node-status-update-frequency: 0s"},
		{"--node-status-report-frequency 1s", "--node-status-report-frequency: 1s: want at least --node-status-update-frequency (10s)"},
		{"--node-ip 127.0.0.300", `--node-ip: "127.0.0.300" is not an IP address`},
		{"--hostname-override Bad_Name", "--node-name"},
		{"--cluster-dns 10.96.0.10,dns", `invalid value "10.96.0.10,dns" for flag -cluster-dns: "dns" is not an IP address`},
		{"-v -1", "-v"},
		{"--maximum-dead-containers-per-container 227", "--maximum-dead-containers-per-container: 227 lets the ListContainers reply of one pod (24 containers) hold up to 17 MiB, more than the 16 MiB a CRI message may hold; at most 226"},
		{"--max-pods 1366", "--max-pods: 1366 pods let ListPodSandbox return up to 17 MiB (2 sandboxes of up to 6 KiB each per pod), more than the 16 MiB a CRI message may hold; at most 1365 pods"},
		{"--minimum-container-ttl-duration -1s", "--minimum-container-ttl-duration"},
		{"--maximum-dead-containers -2", "--maximum-dead-containers: -2: want -1 (no limit) or more"},
		{"--maximum-dead-containers many", "maximum-dead-containers"},
		{"--image-gc-high-threshold 101", "--image-gc-high-threshold: 101: want 0..100"},
		{"--image-gc-low-threshold 90", "--image-gc-low-threshold (90) must not exceed --image-gc-high-threshold (85)"},
		{"--minimum-image-ttl-duration -1m", "--minimum-image-ttl-duration"},
		{"--eviction-soft memory.available<1Gi", "--eviction-soft: memory.available has no grace period in --eviction-soft-grace-period"},
		{"--eviction-soft-grace-period memory.available=soon", "--eviction-soft-grace-period"},
		{"--eviction-minimum-reclaim memory.available=10%", "--eviction-minimum-reclaim: \"memory.available=10%\""},
		{"--eviction-pressure-transition-period -1s", "--eviction-pressure-transition-period"},
		{"--kube-reserved cpu", `--kube-reserved: "cpu": want name=quantity`},
		{"--system-reserved gpu=1", `--system-reserved: unknown resource "gpu"`},
		{"--eviction-hard memory.free<1Gi", `--eviction-hard: "memory.free<1Gi": unknown signal`},
		{"--enforce-node-allocatable system-reserved", "--enforce-node-allocatable"},
		{"--cgroups-per-qos=false", "--enforce-node-allocatable=pods needs --cgroups-per-qos"},
		{"--cgroup-root node-a", "--cgroup-root: \"node-a\": want an absolute cgroup path"},
		{"--kubelet-cgroups kubelet", "--kubelet-cgroups: \"kubelet\": want an absolute cgroup path"},
		{"--runtime-cgroups /a/../runtime", "--runtime-cgroups: \"/a/../runtime\": want an absolute cgroup path"},
		{"--system-cgroups /", "--system-cgroups: the system cgroup cannot be the root"},
		{"--system-cgroups /system --cgroups-per-qos=false --enforce-node-allocatable=none", "--system-cgroups needs --cgroups-per-qos"},
		{"--no-such-flag", "no-such-flag"},
		{"extra", `unexpected argument "extra"`},
	} {
		_, err := parseRunFlags(strings.Fields(tc.args), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("speclet run %s: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// TestRunDaemonOnSim runs the whole daemon on the simulated runtime: a
// manifest in the directory becomes a Running pod on GET /pods, /healthz says
// ok, /metrics has the runtime metrics, and cancelling (as SIGTERM does)
// stops the daemon cleanly.
func TestRunDaemonOnSim(t *testing.T) {
	dir := t.TempDir()
	manifests := filepath.Join(dir, "pods")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: main, image: 'busybox:latest'}]\n"
	if err := os.WriteFile(filepath.Join(manifests, "web.yaml"), []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	// A manifest with a bad field is skipped, with the file and field logged.
	bad := "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec:\n  restartPolicy: Sometimes\n  containers: [{name: main, image: 'busybox:latest'}]\n"
	if err := os.WriteFile(filepath.Join(manifests, "bad.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	// A manifest with 300 KiB of annotations is refused (kubelet's 256 KiB
	// limit), so are a two-document file and a 10 MiB file.
	big := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: big\n  annotations: {a: " + strings.Repeat("x", 300<<10) + "}\nspec:\n  containers: [{name: main, image: 'busybox:latest'}]\n"
	if err := os.WriteFile(filepath.Join(manifests, "big.yaml"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(manifests, "two.yaml"), []byte(pod+"---\n"+pod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(manifests, "huge.yaml"), make([]byte, 10<<20+1), 0o644); err != nil {
		t.Fatal(err)
	}
	// A manifest URL on loopback serves a second pod.
	ul, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	urlSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"remote"},"spec":{"containers":[{"name":"main","image":"busybox:latest"}]}}]}`))
	})}
	go urlSrv.Serve(ul)
	defer urlSrv.Close()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	auditLog := filepath.Join(dir, "cri-audit.jsonl")
	apiPort := harness.FreePort(t)
	o, err := parseRunFlags([]string{"--runtime=sim", "--root-dir", filepath.Join(dir, "root"), "--pod-manifest-path", manifests,
		"--manifest-url", "http://" + ul.Addr().String() + "/pods", "--node-name", "n1", "--read-only-port", fmt.Sprint(port),
		"--healthz-port", "0", "--port", fmt.Sprint(apiPort), "--anonymous-auth", "--cri-audit-log", auditLog}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o.evictionPeriod = 100 * time.Millisecond // observe_signals runs several times
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- runDaemon(ctx, o, &logs) }()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	deadline := time.Now().Add(30 * time.Second)
	for {
		var list v1.PodList
		running := map[string]string{}
		if body, err := httpGet(base + "/pods"); err == nil && json.Unmarshal(body, &list) == nil {
			for _, p := range list.Items {
				running[p.Name] = p.Annotations["kubernetes.io/config.source"] + " " + string(p.Status.Phase)
			}
		}
		if len(running) == 2 && running["web-n1"] == "file Running" && running["remote-n1"] == "http Running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/pods = %v within 30s, want web-n1 (file) and remote-n1 (http) Running and nothing else; log:\n%s", running, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if body, err := httpGet(base + "/healthz"); err != nil || string(body) != "ok" {
		t.Errorf("GET /healthz = %q, %v; want ok", body, err)
	}
	checkPodResources(t, o.rootDir, "default", "web-n1", "main")
	// kubelet's pod-resources counters on the read-only port's /metrics, where e2e_node reads them
	if body, err := httpGet(base + "/metrics"); err != nil || !strings.Contains(string(body), `kubelet_pod_resources_endpoint_requests_list{server_api_version="v1"} 1`) ||
		!strings.Contains(string(body), `kubelet_pod_resources_endpoint_requests_get{server_api_version="v1"} 1`) {
		t.Errorf("GET /metrics lacks the pod-resources counters of one List and one Get (%v)", err)
	}
	// The kubelet API calls the runtime the engine calls (the audit log
	// below shows its calls).
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if resp, err := insecure.Get(fmt.Sprintf("https://127.0.0.1:%d/runningpods/", apiPort)); err != nil {
		t.Errorf("GET /runningpods/ of the kubelet API: %v", err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"name":"web-n1"`) {
			t.Errorf("GET /runningpods/ of the kubelet API: %s %.300s", resp.Status, body)
		}
	}
	if body, err := httpGet(base + "/metrics"); err != nil || !strings.Contains(string(body), "speclet_runtime_operations_duration_seconds") {
		t.Errorf("GET /metrics lacks the runtime metrics (%v)", err)
	}
	// The eviction manager's first pass comes one period after the start,
	// which a loaded machine can put after the pods run: the audit log below
	// is read once the node machine left observing at least once.
	observed := regexp.MustCompile(`speclet_transitions_total\{event="[a-z_]+",from="observing",machine="node",to="[a-z_]+"\} [1-9]`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if body, err := httpGet(base + "/metrics"); err == nil && observed.Match(body) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node machine never left observing within 30s (no observe_signals pass); log:\n%s", logs.String())
		}
	}
	if l := logs.String(); !strings.Contains(l, filepath.Join(manifests, "bad.yaml")) || !strings.Contains(l, "spec.restartPolicy") {
		t.Errorf("log does not name the bad manifest's file and field:\n%s", l)
	}
	// speclet pods and speclet pod read the daemon's /debug/pods.
	var out, errs strings.Builder
	if code := runPods([]string{"--server", base}, &out, &errs); code != 0 ||
		!regexp.MustCompile(`default/web-n1 +\S+ +Running +synced \d+s +ready \d+s +main=running \d+s`).MatchString(out.String()) {
		t.Errorf("speclet pods: exit %d\n%s%s", code, out.String(), errs.String())
	}
	out.Reset()
	if code := runPod([]string{"--server", base, "web-n1"}, &out, &errs); code != 0 ||
		!strings.Contains(out.String(), "container/main  running") ||
		!regexp.MustCompile(`container/main +starting +started +running`).MatchString(out.String()) ||
		!regexp.MustCompile(`sandbox +none +create +creating +run_sandbox`).MatchString(out.String()) {
		t.Errorf("speclet pod web-n1: exit %d\n%s%s", code, out.String(), errs.String())
	}
	if code := runPod([]string{"--server", base, "nope"}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "404") {
		t.Errorf("speclet pod nope: exit %d, stderr %q; want 1 and the 404", code, errs.String())
	}
	// GET /spec/graph draws a machine; with &pod= the pod's current state
	// is filled and the rows it took carry their counts.
	if body, err := httpGet(base + "/spec/graph?machine=pod&format=dot&pod=web-n1"); err != nil ||
		!regexp.MustCompile(`"synced" \[label="synced[^\]]*fillcolor="#ffd54f"`).Match(body) ||
		!regexp.MustCompile(`"pending" -> "syncing" \[label="update \(1x\)"`).Match(body) {
		t.Errorf("GET /spec/graph?machine=pod&format=dot&pod=web-n1 (%v):\n%s", err, body)
	}
	if body, err := httpGet(base + "/spec/graph?machine=container&format=mermaid&pod=web-n1"); err != nil ||
		!strings.Contains(string(body), "class running current") || !strings.Contains(string(body), "pulling --> creating : pull_ok (1x)") {
		t.Errorf("GET /spec/graph?machine=container&format=mermaid&pod=web-n1 (%v):\n%s", err, body)
	}
	if body, err := httpGet(base + "/spec/graph?machine=sandbox&format=svg&pod=web-n1"); err != nil || !strings.Contains(string(body), "<svg") ||
		!strings.Contains(string(body), `class="state current" id="state-ready"`) {
		t.Errorf("GET /spec/graph?machine=sandbox&format=svg (%v): %.300s", err, body)
	}
	if resp, err := http.Get(base + "/spec/graph?machine=nope"); err != nil {
		t.Errorf("GET /spec/graph?machine=nope: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET /spec/graph?machine=nope: %s, want 400", resp.Status)
		}
	}
	for _, want := range []string{
		filepath.Join(manifests, "big.yaml") + ": field metadata.annotations: annotations take",
		filepath.Join(manifests, "two.yaml") + ": 2 YAML documents",
		filepath.Join(manifests, "huge.yaml") + ": 10485761 bytes, more than the 10485760 bytes (10 MiB)",
	} {
		if n := strings.Count(logs.String(), want); n != 1 {
			t.Errorf("log names %q %d times, want once", want, n)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("runDaemon after cancel = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("runDaemon did not return within 30s of cancel")
	}
	if _, err := os.Lstat(filepath.Join(o.rootDir, "pod-resources", "kubelet.sock")); !os.IsNotExist(err) {
		t.Errorf("the pod-resources socket after the stop: %v, want it removed", err)
	}
	if !strings.Contains(logs.String(), "the simulated runtime stops with it and its pods are gone") {
		t.Errorf("log does not say the simulated runtime's pods are gone:\n%s", logs.String())
	}
	// At the default level the log has the lifecycle steps, as structured
	// fields, and no transition lines.
	for _, want := range []string{`msg="SyncLoop ADD" pod=default/web-n1`, `msg="container started" pod=default/web-n1`, "container=main"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("default-level log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "msg=transition") {
		t.Errorf("default-level log has debug transition lines")
	}
	// --cri-audit-log recorded the calls with the actions that made them.
	f, err := os.Open(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := criaudit.ReadLog(f)
	if err != nil {
		t.Fatal(err)
	}
	tagged := map[string]bool{}
	for _, r := range recs {
		tagged[r.Machine+"/"+r.Action+" "+r.Method] = true
	}
	// Every caller of the runtime is in it: the machines' actions, the
	// kubelet API's handlers, log rotation's pass (spec/callers.hcl).
	for _, want := range []string{"sandbox/run_sandbox RunPodSandbox", "container/create_container CreateContainer", "container/start_container StartContainer",
		"node/observe_signals ImageFsInfo", "kubelet_api/running_pods ListPodSandbox", "kubelet_api/running_pods ListContainers",
		"log_rotation/rotate_once ListContainers"} {
		if !tagged[want] {
			t.Errorf("--cri-audit-log has no %s among %d records", want, len(recs))
		}
	}
	if v := criaudit.Check(recs); len(v) > 0 {
		t.Errorf("CRI audit of the daemon: %d violations:\n%s", len(v), criaudit.FormatViolations(v))
	}
	// The signals were observed (ImageFsInfo above) without a failure: the
	// simulated runtime's image filesystem, /sim/images, which does not
	// exist, is measured on --root-dir. It was a WARN every 10 s.
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "observe_signals") && strings.Contains(l, "level=WARN") || strings.Contains(l, "/sim/images") {
			t.Errorf("log: %s", l)
		}
	}
}

// TestSignalsMeasureImageFs: on the simulated runtime the imagefs signals
// are measured on --root-dir, as image GC measures it (fsStat), not on the
// mountpoint the runtime names, which does not exist; a real runtime's
// mountpoint is measured as named.
func TestSignalsMeasureImageFs(t *testing.T) {
	root := t.TempDir()
	nd := &nodeResources{}
	for _, tc := range []struct {
		runtime, mount, wantErr string
	}{
		{"sim", sim.ImageFsMountpoint, ""},
		{"remote", root, ""},
		{"remote", "/nonexistent/images", "statfs /nonexistent/images"},
	} {
		o := &runOptions{runtime: tc.runtime, rootDir: root}
		obs, err := nd.signals(root, o.imageFsPath)(context.Background(), tc.mount)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s runtime, imagefs %s: err = %v, want %q", tc.runtime, tc.mount, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s runtime, imagefs %s: %v", tc.runtime, tc.mount, err)
		}
		if obs["imagefs.available"].Capacity <= 0 || obs["imagefs.inodesFree"].Capacity <= 0 {
			t.Errorf("%s runtime, imagefs %s: observations %v lack imagefs", tc.runtime, tc.mount, obs)
		}
	}
}

func TestRunDaemonBadPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	o, err := parseRunFlags([]string{"--runtime=sim", "--root-dir", t.TempDir(), "--read-only-port", fmt.Sprint(port), "--healthz-port", "0", "--port", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = runDaemon(context.Background(), o, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--read-only-port") || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("runDaemon on a busy port = %v, want an error naming --read-only-port and the cause", err)
	}
}

// TestRunDaemonKubeletAPI starts the daemon with the kubelet API on a free
// port and no --tls-cert-file: it writes a self-signed certificate under the
// root dir, says at start that without --kubeconfig only client certificates
// and AlwaysAllow are possible, and refuses a request without credentials
// with 401.
func TestRunDaemonKubeletAPI(t *testing.T) {
	root := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	o, err := parseRunFlags([]string{"--runtime=sim", "--root-dir", root, "--node-name", "n1", "--read-only-port", "0", "--healthz-port", "0", "--port", fmt.Sprint(port)}, io.Discard)
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
	var resp *http.Response
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for i := 0; ; i++ {
		resp, err = client.Get(fmt.Sprintf("https://127.0.0.1:%d/pods", port))
		if err == nil {
			break
		}
		if i == 100 {
			t.Fatalf("kubelet API does not answer: %v; log:\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /pods without credentials: %d, want 401", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Join(root, "pki", "speclet.crt")); err != nil {
		t.Errorf("no self-signed certificate: %v", err)
	}
	if !strings.Contains(logs.String(), "only client certificates and --authorization-mode=AlwaysAllow are possible") {
		t.Errorf("start log lacks the note on --kubeconfig:\n%s", logs.String())
	}
}

func httpGet(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunDaemonRuntimeDown(t *testing.T) {
	dir := t.TempDir()
	o, err := parseRunFlags([]string{"--container-runtime-endpoint", "unix://" + filepath.Join(dir, "nothing.sock"),
		"--root-dir", dir, "--read-only-port", "0", "--healthz-port", "0", "--port", "0", "--runtime-wait", "1s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = runDaemon(context.Background(), o, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "nothing.sock") || !strings.Contains(err.Error(), "--container-runtime-endpoint") {
		t.Errorf("runDaemon with no runtime = %v, want an error naming the endpoint and the flag", err)
	}
	// Stopped (SIGTERM) while waiting for the runtime: a clean exit.
	o.runtimeWait = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := runDaemon(ctx, o, io.Discard); err != nil {
		t.Errorf("runDaemon stopped while waiting for the runtime = %v, want nil", err)
	}
}

// TestLogLevels: -v 2 shows more than -v 0, -v 4 the transitions.
func TestLogLevels(t *testing.T) {
	for v, want := range map[int]slog.Level{0: slog.LevelInfo, 1: slog.LevelInfo, 2: engine.LevelVerbose, 4: slog.LevelDebug, 6: slog.LevelDebug - 4} {
		if got := logLevel(v); got != want {
			t.Errorf("-v %d: level %v, want %v", v, got, want)
		}
	}
	if logLevel(2) >= logLevel(0) || logLevel(4) >= logLevel(2) {
		t.Errorf("-v 2 must log more than -v 0, and -v 4 more than -v 2")
	}
}

// A second daemon on the same --root-dir fails with an error naming the
// root dir, and leaves the first one's runtime socket and pods alone.
func TestRunDaemonRootDirLock(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	port := harness.FreePort(t)
	o, err := parseRunFlags([]string{"--runtime=sim", "--root-dir", root, "--node-name", "n1", "--read-only-port", fmt.Sprint(port), "--healthz-port", "0", "--port", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- runDaemon(ctx, o, &logs) }()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if body, err := httpGet(base + "/healthz"); err == nil && string(body) == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("first daemon not healthy within 30s; log:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	socks, _ := filepath.Glob(filepath.Join(root, "sim", "*"))
	if len(socks) == 0 {
		t.Fatalf("no simulated runtime files under %s", filepath.Join(root, "sim"))
	}
	before := map[string]os.FileInfo{}
	for _, s := range socks {
		fi, err := os.Stat(s)
		if err != nil {
			t.Fatal(err)
		}
		before[s] = fi
	}

	o2, err := parseRunFlags([]string{"--runtime=sim", "--root-dir", root, "--node-name", "n1", "--read-only-port", fmt.Sprint(harness.FreePort(t)), "--healthz-port", "0", "--port", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = runDaemon(context.Background(), o2, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--root-dir "+root+" is in use by another speclet") {
		t.Fatalf("second daemon on the same root dir: %v, want an error saying the root dir is in use", err)
	}
	for s, fi := range before {
		now, err := os.Stat(s)
		if err != nil || !os.SameFile(fi, now) {
			t.Errorf("the second daemon replaced or removed %s (%v)", s, err)
		}
	}
	if body, err := httpGet(base + "/healthz"); err != nil || string(body) != "ok" {
		t.Errorf("first daemon after the second failed: /healthz = %q, %v", body, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("first daemon: %v", err)
	}
}
