package cgroupstats

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ignoredInterface: cAdvisor's ignoredDevicePrefixes.
func ignoredInterface(name string) bool {
	for _, p := range []string{"lo", "veth", "docker", "nerdctl"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Network reads the interfaces of pid's network namespace
// (/proc/<pid>/net/dev; pid 0: the host's, /proc/1/net/dev, as cAdvisor
// reads the root container's), in the file's order.
func (d Dirs) Network(pid int) ([]Interface, error) {
	if pid == 0 {
		pid = 1
	}
	return ParseNetDev(filepath.Join(d.proc(), strconv.Itoa(pid), "net", "dev"))
}

// ParseNetDev parses a /proc/net/dev file, leaving out the interfaces
// cAdvisor ignores.
func ParseNetDev(path string) ([]Interface, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Interface
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		name = strings.TrimSpace(name)
		fl := strings.Fields(rest)
		if len(fl) < 16 || ignoredInterface(name) {
			continue
		}
		n := make([]uint64, 16)
		for i := range n {
			n[i], _ = strconv.ParseUint(fl[i], 10, 64)
		}
		out = append(out, Interface{Name: name, RxBytes: n[0], RxPackets: n[1], RxErrors: n[2], RxDropped: n[3],
			TxBytes: n[8], TxPackets: n[9], TxErrors: n[10], TxDropped: n[11]})
	}
	return out, sc.Err()
}
