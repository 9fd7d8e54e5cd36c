package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/cri/harness"
)

// Probes on real containerd. Every pod runs on the host network and every
// probe goes to 127.0.0.1.

// probePod is a static pod manifest with one container per entry of cs; each
// container's extra YAML (probes, ports) is indented under it.
func probePod(c *harness.Containerd, name string, grace int, cs ...probeCtr) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  hostNetwork: true\n  terminationGracePeriodSeconds: %d\n  containers:\n", name, grace)
	for _, ct := range cs {
		fmt.Fprintf(&b, "  - name: %s\n    image: %s\n    imagePullPolicy: IfNotPresent\n    command: [\"sh\", \"-c\", %q]\n",
			ct.name, c.ImageRef(harness.BusyboxRepo), ct.command)
		for _, l := range strings.Split(strings.Trim(ct.extra, "\n"), "\n") {
			if l != "" {
				b.WriteString("    " + l + "\n")
			}
		}
	}
	return b.String()
}

type probeCtr struct {
	name, command, extra string
}

func podReady(p *v1.Pod) bool { return p != nil && condition(p, v1.PodReady) == v1.ConditionTrue }

func restarts(p *v1.Pod, name string) int32 {
	if cs := containerStatus(p, name); cs != nil {
		return cs.RestartCount
	}
	return -1
}

// TestProbeLivenessExec: an exec liveness probe that starts failing kills
// the container, which ignores SIGTERM, with the probe's own
// terminationGracePeriodSeconds (1 s, not the pod's 20 s), and the restart
// policy restarts it.
func TestProbeLivenessExec(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "liveness")
	start := time.Now()
	d.writeManifest(t, "liveness", probePod(c, "liveness", 20, probeCtr{
		name:    "main",
		command: "touch /tmp/alive; (sleep 3; rm /tmp/alive) & " + ignoresTERM,
		extra: `livenessProbe:
  exec:
    command: ["test", "-f", "/tmp/alive"]
  periodSeconds: 1
  failureThreshold: 2
  terminationGracePeriodSeconds: 1
`}))
	d.waitPod(t, "liveness", 2*time.Minute, "Running", isRunning)
	p := d.waitPod(t, "liveness", time.Minute, "restarted", func(p *v1.Pod) bool { return restarts(p, "main") >= 1 })
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("restart took %s: the probe's grace period of 1 s was not used (the pod's is 20 s)", took)
	}
	if cs := containerStatus(p, "main"); cs.LastTerminationState.Terminated == nil {
		t.Errorf("no last termination state after a liveness kill:\n%s", describePod(p))
	}
	d.removeManifest(t, "liveness")
	d.waitGone(t, "liveness", 2*time.Minute)
}

// TestProbeReadinessExec: readiness starts false; the pod is Running but not
// Ready until the probe passes, and not Ready again when it fails, without a
// restart.
func TestProbeReadinessExec(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "readiness")
	d.writeManifest(t, "readiness", probePod(c, "readiness", 1, probeCtr{
		name:    "main",
		command: "sleep 4; touch /tmp/ready; sleep 5; rm /tmp/ready; " + handlesTERM,
		extra: `readinessProbe:
  exec:
    command: ["test", "-f", "/tmp/ready"]
  periodSeconds: 1
`}))
	p := d.waitPod(t, "readiness", 2*time.Minute, "Running", isRunning)
	if podReady(p) {
		t.Errorf("Ready before the readiness probe passed:\n%s", describePod(p))
	}
	d.waitPod(t, "readiness", time.Minute, "Ready", podReady)
	p = d.waitPod(t, "readiness", time.Minute, "not Ready again", func(p *v1.Pod) bool { return p != nil && !podReady(p) })
	if !isRunning(p) || restarts(p, "main") != 0 || condition(p, v1.ContainersReady) != v1.ConditionFalse {
		t.Errorf("a failing readiness probe must leave the pod Running, unrestarted and ContainersReady=False:\n%s", describePod(p))
	}
	d.removeManifest(t, "readiness")
	d.waitGone(t, "readiness", 2*time.Minute)
}

// TestProbeStartup: a startup probe holds started and readiness back until
// it passes; a startup probe that never passes restarts its container.
func TestProbeStartup(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "startup")
	d.writeManifest(t, "startup", probePod(c, "startup", 1,
		probeCtr{
			name:    "slow",
			command: "sleep 4; touch /tmp/up; " + handlesTERM,
			extra: `startupProbe:
  exec:
    command: ["test", "-f", "/tmp/up"]
  periodSeconds: 1
  failureThreshold: 30
readinessProbe:
  exec:
    command: ["true"]
  periodSeconds: 1
`},
		probeCtr{
			name:    "never",
			command: handlesTERM,
			extra: `startupProbe:
  exec:
    command: ["false"]
  periodSeconds: 1
  failureThreshold: 2
`}))
	p := d.waitPod(t, "startup", 2*time.Minute, "Running", func(p *v1.Pod) bool {
		cs := containerStatus(p, "slow")
		return cs != nil && cs.State.Running != nil
	})
	if cs := containerStatus(p, "slow"); cs.Ready || (cs.Started != nil && *cs.Started) {
		t.Errorf("slow: started or ready before its startup probe passed:\n%s", describePod(p))
	}
	d.waitPod(t, "startup", time.Minute, "slow started and ready", func(p *v1.Pod) bool {
		cs := containerStatus(p, "slow")
		return cs != nil && cs.Ready && cs.Started != nil && *cs.Started
	})
	p = d.waitPod(t, "startup", time.Minute, "never restarted", func(p *v1.Pod) bool { return restarts(p, "never") >= 1 })
	if podReady(p) {
		t.Errorf("Ready while a container never started:\n%s", describePod(p))
	}
	d.removeManifest(t, "startup")
	d.waitGone(t, "startup", 2*time.Minute)
}

// TestProbeHTTPAndTCP: busybox httpd in the pod; an httpGet readiness probe
// by port name and an httpGet liveness probe by number pass, a tcpSocket
// startup probe passes, and an httpGet readiness probe of a missing path
// (404) keeps its container unready.
func TestProbeHTTPAndTCP(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "httpprobe")
	port := harness.FreePort(t)
	d.writeManifest(t, "httpprobe", probePod(c, "httpprobe", 1,
		probeCtr{
			name:    "web",
			command: fmt.Sprintf("mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 127.0.0.1:%d -h /www", port),
			extra: fmt.Sprintf(`ports:
- name: http
  containerPort: %d
startupProbe:
  tcpSocket:
    host: 127.0.0.1
    port: %d
  periodSeconds: 1
  failureThreshold: 30
readinessProbe:
  httpGet:
    host: 127.0.0.1
    port: http
    path: /index.html
    httpHeaders:
    - name: X-Probe
      value: speclet
  periodSeconds: 1
livenessProbe:
  httpGet:
    host: 127.0.0.1
    port: %d
    path: /index.html
  periodSeconds: 1
  failureThreshold: 1
`, port, port, port)},
		probeCtr{
			name:    "missing",
			command: handlesTERM,
			extra: fmt.Sprintf(`readinessProbe:
  httpGet:
    host: 127.0.0.1
    port: %d
    path: /missing
  periodSeconds: 1
`, port)}))
	d.waitPod(t, "httpprobe", 2*time.Minute, "web ready", func(p *v1.Pod) bool {
		cs := containerStatus(p, "web")
		return cs != nil && cs.Ready
	})
	time.Sleep(4 * time.Second) // a few liveness periods
	p := d.pod(t, "httpprobe")
	if restarts(p, "web") != 0 || !containerStatus(p, "web").Ready || containerStatus(p, "missing").Ready || podReady(p) {
		t.Errorf("web must stay ready and unrestarted, missing unready (404), the pod not Ready:\n%s", describePod(p))
	}
	d.removeManifest(t, "httpprobe")
	d.waitGone(t, "httpprobe", 2*time.Minute)
}

// TestProbeGRPC: a grpc probe against a small grpc.health.v1 server that the
// test builds and mounts into the pod (hostPath), serving on 127.0.0.1 (the
// node IP of the test daemon, the host of a hostNetwork pod's grpc probe):
// the overall service passes startup (which holds liveness back until the
// server listens), readiness and liveness; the service "down"
// (NOT_SERVING) keeps its container unready.
func TestProbeGRPC(t *testing.T) {
	t.Parallel()
	c, d := env(t)
	d.dumpOnFailure(t, "grpcprobe")
	dir := t.TempDir()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	build := exec.Command(goBin, "build", "-o", filepath.Join(dir, "grpchealth"), "./testdata/grpchealth")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build grpchealth: %v\n%s", err, out)
	}
	port := harness.FreePort(t)
	m := probePod(c, "grpcprobe", 1,
		probeCtr{
			name:    "server",
			command: fmt.Sprintf("exec /bin2/grpchealth -addr 127.0.0.1:%d", port),
			extra: fmt.Sprintf(`volumeMounts:
- name: bin
  mountPath: /bin2
startupProbe:
  grpc:
    port: %d
  periodSeconds: 1
  failureThreshold: 30
readinessProbe:
  grpc:
    port: %d
  periodSeconds: 1
livenessProbe:
  grpc:
    port: %d
  periodSeconds: 1
  failureThreshold: 1
`, port, port, port)},
		probeCtr{
			name:    "down",
			command: handlesTERM,
			extra: fmt.Sprintf(`readinessProbe:
  grpc:
    port: %d
    service: down
  periodSeconds: 1
`, port)})
	m += fmt.Sprintf("  volumes:\n  - name: bin\n    hostPath:\n      path: %s\n", dir)
	d.writeManifest(t, "grpcprobe", m)
	d.waitPod(t, "grpcprobe", 2*time.Minute, "server ready", func(p *v1.Pod) bool {
		cs := containerStatus(p, "server")
		return cs != nil && cs.Ready
	})
	time.Sleep(3 * time.Second) // a few liveness periods
	p := d.pod(t, "grpcprobe")
	if restarts(p, "server") != 0 || !containerStatus(p, "server").Ready || containerStatus(p, "down").Ready || podReady(p) {
		t.Errorf("server must stay ready and unrestarted, down unready (NOT_SERVING), the pod not Ready:\n%s", describePod(p))
	}
	d.removeManifest(t, "grpcprobe")
	d.waitGone(t, "grpcprobe", 2*time.Minute)
}
