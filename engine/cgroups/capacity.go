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
	if meminfo == "" {
		meminfo = "/proc/meminfo"
	}
	f, err := os.Open(meminfo)
	if err != nil {
		return nil, fmt.Errorf("read machine memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("read machine memory: %s: %w", meminfo, err)
			}
			return v1.ResourceList{
				v1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
				v1.ResourceMemory: *resource.NewQuantity(kb*1024, resource.BinarySI),
			}, nil
		}
	}
	return nil, fmt.Errorf("read machine memory: no MemTotal in %s", meminfo)
}
