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
