package harness

import (
	"os"
	"testing"
	"time"
)

// TestProcCPU: the test process's CPU time grows while it computes; a
// process that does not exist is an error.
func TestProcCPU(t *testing.T) {
	before, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for t0 := time.Now(); time.Since(t0) < 300*time.Millisecond; {
		x++
	}
	after, err := ProcCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("CPU time %v after 300 ms of computing (%d loops), %v before", after, x, before)
	}
	if _, err := ProcCPU(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

// TestProcStatus: the test process has a resident set, its anonymous part
// no larger than the whole; an unknown field is an error.
func TestProcStatus(t *testing.T) {
	m, err := ProcStatus(os.Getpid(), "VmRSS", "RssAnon")
	if err != nil {
		t.Fatal(err)
	}
	if m["VmRSS"] <= 0 || m["RssAnon"] <= 0 || m["RssAnon"] > m["VmRSS"] {
		t.Errorf("VmRSS %d, RssAnon %d bytes", m["VmRSS"], m["RssAnon"])
	}
	if _, err := ProcStatus(os.Getpid(), "NoSuchField"); err == nil {
		t.Error("no error for a field /proc/PID/status does not have")
	}
}
