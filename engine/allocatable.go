package engine

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/speclet/speclet/engine/volume"
)

// nodeAllocatable is the machine's CPU count and memory (MemTotal of
// /proc/meminfo): what a downward API limits.* falls back to for a
// container without a limit.
func nodeAllocatable() volume.Node {
	n := volume.Node{CPU: *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI)}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return n
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
				n.Memory = *resource.NewQuantity(kb*1024, resource.BinarySI)
			}
		}
	}
	return n
}
