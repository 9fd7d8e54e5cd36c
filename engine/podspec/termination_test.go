package podspec

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func termPod(c v1.Container) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec: v1.PodSpec{Containers: []v1.Container{c}}}
}

// TestTerminationMount: each instance gets a fresh empty file, mode 0666
// whatever the umask, under <root>/pods/<uid>/containers/<name>, mounted at
// the container's terminationMessagePath; no path, no mount; a relative
// path is refused naming the field.
func TestTerminationMount(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, tc := range []struct {
		name, path string
		want       string // container path; "" none
		err        string
	}{
		{name: "default path", path: "/dev/termination-log", want: "/dev/termination-log"},
		{name: "other path", path: "/tmp/my/../term", want: "/tmp/term"},
		{name: "no path", path: ""},
		{name: "relative", path: "dev/term", err: `pod ns/p container "c": terminationMessagePath: "dev/term" is not an absolute path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			c := v1.Container{Name: "c", Image: "busybox", TerminationMessagePath: tc.path}
			pod := termPod(c)
			cfg, err := Container(Node{RootDir: root}, ContainerRequest{Pod: pod, Container: &pod.Spec.Containers[0]})
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []*runtimeapi.Mount
			for _, m := range cfg.Mounts {
				if strings.HasPrefix(m.HostPath, ContainerDir(root, pod, "c")+"/") {
					got = append(got, m)
				}
			}
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("mounts %v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].ContainerPath != tc.want {
				t.Fatalf("mounts %v, want one at %s", got, tc.want)
			}
			fi, err := os.Stat(got[0].HostPath)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o666 || fi.Size() != 0 {
				t.Errorf("file mode %v size %d, want 0666 and empty", fi.Mode().Perm(), fi.Size())
			}
			again, err := Container(Node{RootDir: root}, ContainerRequest{Pod: pod, Container: &pod.Spec.Containers[0], RestartCount: 1})
			if err != nil {
				t.Fatal(err)
			}
			if h := again.Mounts[len(again.Mounts)-1].HostPath; h == got[0].HostPath {
				t.Errorf("second instance reuses %s, want a file of its own", h)
			}
		})
	}
}

// TestTerminationMessage: the file's content (its last 4 KiB), and whether
// the log must be read instead, as kubelet decides.
func TestTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o666); err != nil {
			t.Fatal(err)
		}
		return p
	}
	long := strings.Repeat("a", 5000) + "END"
	mnt := func(host string) []*runtimeapi.Mount {
		return []*runtimeapi.Mount{{HostPath: "/x", ContainerPath: "/etc/x"}, {HostPath: host, ContainerPath: "/dev/termination-log"}}
	}
	for _, tc := range []struct {
		name     string
		policy   v1.TerminationMessagePolicy
		path     string
		mounts   []*runtimeapi.Mount
		exit     int32
		reason   string
		want     string
		wantLogs bool
	}{
		{name: "message", mounts: mnt(file("m", "bye")), exit: 0, want: "bye"},
		{name: "last 4 KiB", mounts: mnt(file("l", long)), exit: 1, want: long[len(long)-4096:]},
		{name: "empty, ReadFile", mounts: mnt(file("e", "")), exit: 1},
		{name: "empty, fallback, failed", policy: v1.TerminationMessageFallbackToLogsOnError, mounts: mnt(file("e2", "")), exit: 2, wantLogs: true},
		{name: "empty, fallback, succeeded", policy: v1.TerminationMessageFallbackToLogsOnError, mounts: mnt(file("e3", "")), exit: 0},
		{name: "message, fallback, failed", policy: v1.TerminationMessageFallbackToLogsOnError, mounts: mnt(file("m2", "why")), exit: 1, want: "why"},
		{name: "fallback, could not run", policy: v1.TerminationMessageFallbackToLogsOnError, mounts: mnt(file("e4", "")), exit: 128, reason: "ContainerCannotRun"},
		{name: "missing file, fallback", policy: v1.TerminationMessageFallbackToLogsOnError, mounts: mnt(filepath.Join(dir, "none")), exit: 1, wantLogs: true},
		{name: "no mount", mounts: nil, exit: 1},
		{name: "no path, fallback", policy: v1.TerminationMessageFallbackToLogsOnError, path: "-", exit: 1, wantLogs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: tc.policy}
			if tc.path == "-" {
				c.TerminationMessagePath = ""
			}
			got, logs := TerminationMessage(c, tc.mounts, tc.exit, tc.reason)
			if got != tc.want || logs != tc.wantLogs {
				t.Errorf("got %.40q, logs %v; want %.40q, logs %v", got, logs, tc.want, tc.wantLogs)
			}
		})
	}
}
