package cgroups

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// MachineCapacity is the node's capacity as kubelet reads it from the
// machine: the CPUs and MemTotal of meminfo (default /proc/meminfo).
func MachineCapacity(meminfo string) (v1.ResourceList, error) {
	m, err := Meminfo(meminfo)
	if err != nil {
		return nil, fmt.Errorf("read machine memory: %w", err)
	}
	total, ok := m["MemTotal"]
	if !ok {
		if meminfo == "" {
			meminfo = "/proc/meminfo"
		}
		return nil, fmt.Errorf("read machine memory: no MemTotal in %s", meminfo)
	}
	return v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(int64(total), resource.BinarySI),
	}, nil
}

// Meminfo reads a meminfo file (default /proc/meminfo): every field, in
// bytes for the fields given in kB, by name (MemTotal, MemAvailable, ...).
// It is the node's one reader of meminfo.
func Meminfo(path string) (map[string]uint64, error) {
	if path == "" {
		path = "/proc/meminfo"
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) == 0 {
			continue
		}
		v, err := strconv.ParseUint(fs[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: field %s: %w", path, k, err)
		}
		if len(fs) > 1 && fs[1] == "kB" {
			v *= 1024
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}
