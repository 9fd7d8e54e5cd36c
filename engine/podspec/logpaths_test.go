package podspec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod's log directory, its containers' and the links are named as
// kubelet names them, so that log shippers find them.
func TestLogPaths(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "web-1", UID: "0f1e-22"}}
	dir := LogDir("/var/log/pods", pod)
	if dir != "/var/log/pods/kube-system_web-1_0f1e-22" {
		t.Errorf("LogDir = %q", dir)
	}
	if got := ContainerLogDir(dir, "app"); got != "/var/log/pods/kube-system_web-1_0f1e-22/app" {
		t.Errorf("ContainerLogDir = %q", got)
	}
	if got := (Node{RootDir: "/r"}).LogsDir(); got != "/r/logs" {
		t.Errorf("LogsDir without PodLogsDir = %q, want /r/logs", got)
	}
	if got := (Node{RootDir: "/r", PodLogsDir: "/var/log/pods"}).LogsDir(); got != "/var/log/pods" {
		t.Errorf("LogsDir = %q, want /var/log/pods", got)
	}
	id := strings.Repeat("ab", 32)
	if got := LogLink("/var/log/containers", "kube-system", "web-1", "app", id); got != "/var/log/containers/web-1_kube-system_app-"+id+".log" {
		t.Errorf("LogLink = %q", got)
	}
	if got := LogLink("", "kube-system", "web-1", "app", id); got != "" {
		t.Errorf("LogLink without a links directory = %q, want none", got)
	}
}

// A link name longer than a file name can be is cut to 255 bytes before
// its .log, as kubelet cuts it.
func TestLogLinkLongName(t *testing.T) {
	name := strings.Repeat("n", 200)
	id := strings.Repeat("c", 64)
	got := filepath.Base(LogLink("/l", "ns", name, "app", id))
	if len(got) != 255 || !strings.HasSuffix(got, ".log") || !strings.HasPrefix(got, name+"_ns_app-cccc") {
		t.Errorf("LogLink of a long name = %q (%d bytes), want 255 bytes ending in .log", got, len(got))
	}
}

// The sandbox's LogDirectory is in the node's pod logs directory.
func TestSandboxLogDirectory(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
	cfg, err := Sandbox(Node{RootDir: "/r", PodLogsDir: "/logs/pods"}, SandboxRequest{Pod: pod})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.LogDirectory != "/logs/pods/ns_p_u" {
		t.Errorf("LogDirectory = %q, want /logs/pods/ns_p_u", cfg.LogDirectory)
	}
}

// TestRestartCountFromLogs: the next instance of a container counts on from
// the log files of its earlier ones, rotated ones included; other files,
// directories and a missing directory count nothing.
func TestRestartCountFromLogs(t *testing.T) {
	for _, tc := range []struct {
		files []string
		want  int32
	}{
		{nil, 0},
		{[]string{"0.log"}, 1},
		{[]string{"0.log", "1.log", "1.log.20261203-041500.gz"}, 2},
		{[]string{"4.log.20261203-041500"}, 5},
		{[]string{"x.log", "0.logs", "notes", "7/"}, 0},
	} {
		dir := t.TempDir()
		for _, f := range tc.files {
			p := filepath.Join(dir, f)
			var err error
			if strings.HasSuffix(f, "/") {
				err = os.Mkdir(p, 0o755)
			} else {
				err = os.WriteFile(p, nil, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := RestartCountFromLogs(dir); got != tc.want {
			t.Errorf("files %q: %d, want %d", tc.files, got, tc.want)
		}
	}
	if got := RestartCountFromLogs(filepath.Join(t.TempDir(), "missing")); got != 0 {
		t.Errorf("missing directory: %d, want 0", got)
	}
}
