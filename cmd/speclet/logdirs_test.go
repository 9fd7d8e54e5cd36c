package main

import (
	"io"
	"strings"
	"testing"
)

// The log directories default to kubelet's, or under --root-dir on the
// simulated runtime unless given; a bad one is refused naming its flag.
func TestRunLogDirs(t *testing.T) {
	for _, tc := range []struct{ args, pods, links string }{
		{"--root-dir /r", "/var/log/pods", "/var/log/containers"},
		{"--root-dir /r --runtime=sim", "/r/logs", "/r/containers"},
		{"--root-dir /r --runtime=sim --pod-logs-dir /p/ --container-log-links-dir /l", "/p", "/l"},
		{"--root-dir /r --pod-logs-dir /tmp/x/pods --container-log-links-dir /tmp/x/containers", "/tmp/x/pods", "/tmp/x/containers"},
	} {
		o, err := parseRunFlags(strings.Fields(tc.args), io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if o.podLogsDir != tc.pods || o.containerLogLinksDir != tc.links {
			t.Errorf("%q: pod logs %q, links %q; want %q, %q", tc.args, o.podLogsDir, o.containerLogLinksDir, tc.pods, tc.links)
		}
	}
	for _, tc := range []struct{ args, want string }{
		{"--pod-logs-dir logs", `--pod-logs-dir: "logs": want an absolute directory other than /`},
		{"--pod-logs-dir /", `--pod-logs-dir: "/"`},
		{"--container-log-links-dir ./c", `--container-log-links-dir: "./c"`},
		{"--pod-logs-dir /x --container-log-links-dir /x/", `--container-log-links-dir: "/x": the same directory as --pod-logs-dir`},
	} {
		_, err := parseRunFlags(strings.Fields(tc.args), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// The device plugins' directory is kubelet's fixed one, where plugins dial,
// or under --root-dir on the simulated runtime unless given; a relative one
// is refused naming the flag.
func TestRunDevicePluginsDir(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--root-dir /r", "/var/lib/kubelet/device-plugins"},
		{"--root-dir /r --runtime=sim", "/r/device-plugins"},
		{"--root-dir /r --runtime=sim --device-plugins-dir /d/", "/d"},
		{"--root-dir /r --device-plugins-dir /tmp/n/device-plugins", "/tmp/n/device-plugins"},
	} {
		o, err := parseRunFlags(strings.Fields(tc.args), io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if o.devicePluginsDir != tc.want {
			t.Errorf("%q: device plugins in %q, want %q", tc.args, o.devicePluginsDir, tc.want)
		}
	}
	for _, arg := range []string{"--device-plugins-dir plugins", "--device-plugins-dir /"} {
		_, err := parseRunFlags(strings.Fields(arg), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--device-plugins-dir") {
			t.Errorf("%q: %v, want an error naming --device-plugins-dir", arg, err)
		}
	}
}
