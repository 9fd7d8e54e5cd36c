package cgroups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMeminfo: the one meminfo reader gives bytes for kB fields, the
// capacity's memory is MemTotal, and a file without MemTotal is an error
// naming the file.
func TestMeminfo(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "meminfo")
	os.WriteFile(good, []byte("MemTotal:        2048 kB\nMemAvailable:    1024 kB\nHugePages_Total:       3\n"), 0o644)
	m, err := Meminfo(good)
	if err != nil {
		t.Fatal(err)
	}
	if m["MemTotal"] != 2<<20 || m["MemAvailable"] != 1<<20 || m["HugePages_Total"] != 3 {
		t.Errorf("meminfo %v, want MemTotal 2Mi, MemAvailable 1Mi, HugePages_Total 3", m)
	}
	c, err := MachineCapacity(good)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Memory().Value(); got != 2<<20 {
		t.Errorf("capacity memory %d, want %d", got, 2<<20)
	}
	if c.Cpu().Value() < 1 {
		t.Errorf("capacity cpu %s, want at least 1", c.Cpu())
	}
	bad := filepath.Join(dir, "nototal")
	os.WriteFile(bad, []byte("MemFree: 10 kB\n"), 0o644)
	if _, err := MachineCapacity(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("MachineCapacity of a file without MemTotal: %v, want an error naming %s", err, bad)
	}
	if _, err := Meminfo(""); err != nil {
		t.Errorf("the machine's /proc/meminfo: %v", err)
	}
}
