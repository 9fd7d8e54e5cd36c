package nodee2e

import (
	"regexp"
	"testing"
)

// TestHostFailCheck: a host-bound failure passes only when it names
// series, all of them ones the host cannot give.
func TestHostFailCheck(t *testing.T) {
	h := hostFail{fails: true, allow: regexp.MustCompile(`^container_(fs|blkio)_`)}
	for _, c := range []struct {
		msg string
		ok  bool
	}{
		{"missing expected key container_fs_reads_total\nmissing expected key container_blkio_device_usage_total", true},
		{"missing expected key container_fs_reads_total\n.container_memory_rss: Expected <float64>: 0 to be >= 10240", false},
		{"Timed out after 60s: pod busybox-container not running", false},
		{"missing expected key container_fs_reads_total\nIn [It] at: container_metrics_test.go:121", true},
	} {
		if err := h.check(c.msg); (err == nil) != c.ok {
			t.Errorf("check(%q) = %v, want ok %v", c.msg, err, c.ok)
		}
	}
}
