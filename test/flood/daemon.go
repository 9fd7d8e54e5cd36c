package flood

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Daemon is `speclet run --runtime=sim` with both HTTP ports on 127.0.0.1
// and a file descriptor limit, started through prlimit(1).
type Daemon struct {
	Cmd       *exec.Cmd
	Base      string // http://127.0.0.1:<read-only port>
	API       string // https://127.0.0.1:<kubelet API port>
	Manifests string
	LogPath   string
	exited    chan struct{}
}

// Start runs bin under prlimit --nofile=noFile:noFile with its root,
// manifests and log under dir, plus args, and waits for /healthz.
func Start(bin, dir string, noFile int, args ...string) (*Daemon, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	d := &Daemon{Base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), API: fmt.Sprintf("https://127.0.0.1:%d", ports[1]),
		Manifests: filepath.Join(dir, "manifests"), LogPath: filepath.Join(dir, "speclet.log")}
	if err := os.MkdirAll(d.Manifests, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(d.LogPath)
	if err != nil {
		return nil, err
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		return nil, fmt.Errorf("prlimit (util-linux) sets speclet's file descriptor limit: %w", err)
	}
	d.Cmd = exec.Command(prlimit, append([]string{fmt.Sprintf("--nofile=%d:%d", noFile, noFile), bin, "run", "--runtime=sim",
		"--root-dir", filepath.Join(dir, "root"), "--pod-manifest-path", d.Manifests, "--node-name", "flood",
		"--address", "127.0.0.1", "--read-only-port", strconv.Itoa(ports[0]), "--port", strconv.Itoa(ports[1]), "--healthz-port", "0"}, args...)...)
	d.Cmd.Stdout, d.Cmd.Stderr = logf, logf
	d.Cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.Cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	d.exited = make(chan struct{})
	go func() { d.Cmd.Wait(); logf.Close(); close(d.exited) }()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, err := Probe(d.Base+"/healthz", 5*time.Second); err == nil {
			return d, nil
		}
		select {
		case <-d.exited:
			b, _ := os.ReadFile(d.LogPath)
			return nil, fmt.Errorf("speclet exited at start (%s); log:\n%s", d.Cmd.ProcessState, b)
		default:
		}
		if time.Now().After(deadline) {
			d.Stop()
			b, _ := os.ReadFile(d.LogPath)
			return nil, fmt.Errorf("speclet not healthy within 2 minutes; log:\n%s", b)
		}
	}
}

// Pid is speclet's process id (prlimit execs it).
func (d *Daemon) Pid() int { return d.Cmd.Process.Pid }

// Stop sends SIGTERM and waits up to 30 s, then kills.
func (d *Daemon) Stop() {
	d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.Cmd.Process.Kill()
		<-d.exited
	}
}

// WriteManifest writes a busybox pod named name (atomically: a rename).
func (d *Daemon) WriteManifest(name string) error {
	body := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers: [{name: main, image: 'busybox:latest', imagePullPolicy: IfNotPresent}]\n", name)
	tmp := filepath.Join(d.Manifests, "."+name)
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(d.Manifests, name+".yaml"))
}

// RemoveManifest removes the manifest of WriteManifest.
func (d *Daemon) RemoveManifest(name string) error {
	return os.Remove(filepath.Join(d.Manifests, name+".yaml"))
}

// Running reports whether GET /pods (one new connection, within timeout)
// shows the static pod name (<name>-flood) Running.
func (d *Daemon) Running(name string, timeout time.Duration) (bool, error) {
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(d.Base + "/pods")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct{ Phase string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return false, fmt.Errorf("GET /pods: %s: %w", resp.Status, err)
	}
	for _, p := range list.Items {
		if p.Metadata.Name == name+"-flood" {
			return p.Status.Phase == "Running", nil
		}
	}
	return false, nil
}

// StartLatency writes manifest name and polls /pods every 50 ms until the
// pod is Running; it returns the time from the write, or an error after
// limit.
func (d *Daemon) StartLatency(name string, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	if err := d.WriteManifest(name); err != nil {
		return 0, err
	}
	var last error
	for time.Since(start) < limit {
		ok, err := d.Running(name, limit)
		if ok {
			return time.Since(start), nil
		}
		if err != nil {
			last = err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start), fmt.Errorf("pod %s not Running in /pods within %s (last error: %v)", name, limit, last)
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
