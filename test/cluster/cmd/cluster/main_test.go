package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/cluster"
)

// TestInterruptLeavesNothing runs the cluster command as `make cluster`
// does (the built binary, in its own process group as a terminal runs it),
// creates a Deployment of 3 pods and one more pod, each with the projected
// service-account volume (kube-api-access-*, a tmpfs under the node's root
// dir), interrupts it with SIGINT as Ctrl-C does, and checks that no mount,
// process or directory of it is left, and that the command says so. The
// volumes stayed mounted while it said "stopped; nothing is left".
func TestInterruptLeavesNothing(t *testing.T) {
	ci := os.Getenv("CI") == "true"
	skip := func(msg string) {
		if ci {
			t.Fatalf("CI=true: %s", msg)
		}
		t.Skip(msg)
	}
	if os.Geteuid() != 0 {
		skip("the cluster command runs containerd: run the tests as root")
	}
	if _, err := os.Stat(cluster.EtcdPath); err != nil {
		skip(fmt.Sprintf("%s missing (Debian package etcd-server; make deps installs it)", cluster.EtcdPath))
	}
	if !cluster.BinariesCached(cluster.DefaultVersion) {
		skip("control-plane binaries not built; run `make kube-binaries` (minutes when cold)")
	}
	tmp := t.TempDir()
	speclet, err := cluster.BuildSpeclet(tmp)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tmp, "speclet-cluster")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build the cluster command: %v\n%s", err, out)
	}
	// TMPDIR holds the command's own directories (the nodes' and the
	// control plane's); containerd's are /tmp/speclet-* (a short socket
	// path), named in its output. It is short too, as /tmp is for `make
	// cluster`: a node's sockets under its root dir (pod-resources, device
	// plugins) must fit a unix socket path's 107 bytes, which a path under
	// t.TempDir() does not.
	work, err := os.MkdirTemp("", "scw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	args := []string{"--speclet", speclet, "--nodes", "2", "--registry-addr", "127.0.0.1:0"}
	if !cluster.MetricsServerCached() {
		// make cluster builds it first (make metrics-server-binary);
		// test/cluster's TestCluster runs it.
		args = append(args, "--metrics-server=false")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+work)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	interrupted := false
	defer func() {
		if !interrupted {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
			select {
			case <-exited:
			case <-time.After(3 * time.Minute):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		}
	}()

	// The export line and the image reference come on stdout once the
	// cluster runs.
	type ready struct{ kubeconfig, image string }
	readyc := make(chan ready, 1)
	go func() {
		var r ready
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l := strings.TrimSpace(sc.Text())
			if v, ok := strings.CutPrefix(l, "export KUBECONFIG="); ok {
				r.kubeconfig = v
			}
			if m := regexp.MustCompile(`--image=(\S+/busybox:latest)`).FindStringSubmatch(l); m != nil {
				r.image = m[1]
				readyc <- r
			}
		}
	}()
	var r ready
	select {
	case r = <-readyc:
	case err := <-exited:
		t.Fatalf("cluster command exited at start: %v\n%s", err, stderr.String())
	case <-time.After(5 * time.Minute):
		t.Fatalf("cluster not running within 5 minutes:\n%s", stderr.String())
	}
	// stdout and stderr are two pipes: the nodes' lines, written to
	// stderr before the export line, may still be on their way.
	var runtimeDirs []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		runtimeDirs = runtimeDirs[:0]
		for _, m := range regexp.MustCompile(`node node-[a-z]: containerd unix://(/tmp/speclet-[^/]+)/`).FindAllStringSubmatch(stderr.String(), -1) {
			runtimeDirs = append(runtimeDirs, m[1])
		}
		if len(runtimeDirs) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	if len(runtimeDirs) != 2 {
		t.Fatalf("want the containerd of each of 2 nodes in the output, found %v:\n%s", runtimeDirs, stderr.String())
	}

	client, err := cluster.Clientset(r.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	uids := createPods(ctx, t, client, r.image)

	// Every pod's kube-api-access volume is mounted: the check below is
	// about something that was there.
	for uid := range uids {
		if !mounted(t, uid, "kubernetes.io~projected/kube-api-access-") {
			t.Fatalf("pod %s has no kube-api-access tmpfs in /proc/mounts", uids[uid])
		}
	}

	interrupted = true
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("cluster command after SIGINT: %v", err)
		}
	case <-time.After(3 * time.Minute):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("cluster command did not exit within 3 minutes of SIGINT:\n%s", stderr.String())
	}
	if out := stderr.String(); !strings.Contains(out, "cluster: stopped; nothing is left") {
		t.Errorf("the command does not say nothing is left:\n%s", tail(out, 40))
	}

	// What is left, checked here, not taken from the command's word.
	for uid, name := range uids {
		if mounted(t, uid, "") {
			t.Errorf("pod %s: a mount of its is left", name)
		}
	}
	for _, d := range append([]string{work}, runtimeDirs...) {
		for _, m := range harness.Mounts(d) {
			t.Errorf("mount left: %s", m)
		}
		for _, p := range harness.Leftovers(d) {
			t.Errorf("process left: %d %s", p.PID, p.Cmdline)
		}
	}
	if ents, err := os.ReadDir(work); err != nil || len(ents) > 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("directories left in the command's TMPDIR: %v (%v)", names, err)
	}
	for _, d := range runtimeDirs {
		if _, err := os.Lstat(d); err == nil {
			t.Errorf("containerd directory left: %s", d)
		}
	}
}

// createPods creates a Deployment of 3 pods and one more pod, waits until
// all 4 run, and returns their UIDs (to names).
func createPods(ctx context.Context, t *testing.T, client *kubernetes.Clientset, image string) map[string]string {
	t.Helper()
	labels := map[string]string{"app": "web"}
	replicas := int32(3)
	grace := int64(1)
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: &grace,
		Containers:                    []corev1.Container{{Name: "main", Image: image, Command: []string{"sleep", "3600"}}},
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Deployment: %v", err)
	}
	// The default ServiceAccount appears when the controller-manager has
	// started; the pod is refused until then.
	one := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "one"}, Spec: spec}
	for {
		_, err := client.CoreV1().Pods("default").Create(ctx, one, metav1.CreateOptions{})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create pod one: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for {
		pods, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		uids := map[string]string{}
		var states []string
		if err == nil {
			for _, p := range pods.Items {
				states = append(states, fmt.Sprintf("%s=%s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					uids[string(p.UID)] = p.Name
				}
			}
			if len(uids) == 4 && len(pods.Items) == 4 {
				return uids
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("4 pods not Running: %v %v", states, err)
		}
		time.Sleep(time.Second)
	}
}

// mounted reports whether /proc/mounts has a mount point under a pod
// directory of uid whose path contains sub.
func mounted(t *testing.T, uid, sub string) bool {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 1 && strings.Contains(f[1], "/pods/"+uid+"/") && strings.Contains(f[1], sub) {
			return true
		}
	}
	return false
}

func tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
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
