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
