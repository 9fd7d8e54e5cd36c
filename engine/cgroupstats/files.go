package cgroupstats

// The formats of the cgroup files and of /proc.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// blkioV1 reads blkio.throttle.io_service_bytes_recursive and
// io_serviced_recursive ("8:0 Read 4096").
func (d Dirs) blkioV1(dir string) []Device {
	if dir == "" {
		return nil
	}
	devs := map[[2]uint64]*Device{}
	var order [][2]uint64
	read := func(file string, set func(dv *Device, op string, v uint64)) {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return
		}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) != 3 {
				continue
			}
			maj, min, ok := majMin(f[0])
			if !ok {
				continue
			}
			v, _ := strconv.ParseUint(f[2], 10, 64)
			k := [2]uint64{maj, min}
			dv := devs[k]
			if dv == nil {
				dv = &Device{Major: maj, Minor: min, Name: devName(maj, min)}
				devs[k] = dv
				order = append(order, k)
			}
			set(dv, f[1], v)
		}
	}
	read("blkio.throttle.io_service_bytes_recursive", func(dv *Device, op string, v uint64) {
		switch op {
		case "Read":
			dv.ReadBytes = v
		case "Write":
			dv.WriteBytes = v
		}
	})
	read("blkio.throttle.io_serviced_recursive", func(dv *Device, op string, v uint64) {
		switch op {
		case "Read":
			dv.Reads = v
		case "Write":
			dv.Writes = v
		}
	})
	out := make([]Device, 0, len(order))
	for _, k := range order {
		out = append(out, *devs[k])
	}
	return out
}

// ioV2 reads io.stat ("8:0 rbytes=1 wbytes=2 rios=3 wios=4 ...").
func (d Dirs) ioV2(dir string) []Device {
	b, err := os.ReadFile(filepath.Join(dir, "io.stat"))
	if err != nil {
		return nil
	}
	var out []Device
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		maj, min, ok := majMin(f[0])
		if !ok {
			continue
		}
		dv := Device{Major: maj, Minor: min, Name: devName(maj, min)}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseUint(v, 10, 64)
			switch k {
			case "rbytes":
				dv.ReadBytes = n
			case "wbytes":
				dv.WriteBytes = n
			case "rios":
				dv.Reads = n
			case "wios":
				dv.Writes = n
			}
		}
		out = append(out, dv)
	}
	return out
}

func majMin(s string) (uint64, uint64, bool) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, false
	}
	maj, err1 := strconv.ParseUint(a, 10, 64)
	min, err2 := strconv.ParseUint(b, 10, 64)
	return maj, min, err1 == nil && err2 == nil
}

var devNames sync.Map // [2]uint64 → string

// devName is /dev/<DEVNAME> of a block device from /sys/dev/block, ""
// when unknown.
func devName(maj, min uint64) string {
	k := [2]uint64{maj, min}
	if v, ok := devNames.Load(k); ok {
		return v.(string)
	}
	name := ""
	if b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/uevent", maj, min)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "DEVNAME="); ok {
				name = "/dev/" + v
			}
		}
	}
	devNames.Store(k, name)
	return name
}

func limit(v uint64) uint64 {
	if v >= unlimited {
		return 0
	}
	return v
}

func sat(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

func readUint(dir, file string) (uint64, bool) {
	if dir == "" {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, strings.TrimSpace(string(b)) == "max" // "max": no limit, 0
	}
	return v, true
}

func readInt(dir, file string) (int64, bool) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// readKV reads "key value" lines; nil when the file cannot be read.
func readKV(path string) map[string]uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	out := map[string]uint64{}
	for _, l := range bytes.Split(b, []byte{'\n'}) {
		k, v, ok := bytes.Cut(l, []byte{' '})
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		if err == nil {
			out[string(k)] = n
		}
	}
	return out
}

func readPids(path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// countFDs counts a process's descriptors and those that are sockets.
func countFDs(dir string) (fds, sockets uint64) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range ents {
		fds++
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			sockets++
		}
	}
	return fds, sockets
}

// openFilesSoft is the soft "Max open files" of /proc/<pid>/limits; 0
// when unlimited or unknown.
func openFilesSoft(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, _ := strconv.ParseUint(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

// readPressure reads a pressure file: a "some" and a "full" line of
// "avg10=0.12 avg60=0.05 avg300=0.01 total=1234". nil when the file cannot
// be read or holds neither line (PSI off: reading fails with EOPNOTSUPP); a
// kernel that writes only "some" (cpu.pressure before 5.13) leaves Full
// zero, as cAdvisor does.
func readPressure(path string) *Pressure {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var p Pressure
	found := false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		var dst *PressureData
		switch f[0] {
		case "some":
			dst = &p.Some
		case "full":
			dst = &p.Full
		default:
			continue
		}
		found = true
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "avg10":
				dst.Avg10, _ = strconv.ParseFloat(v, 64)
			case "avg60":
				dst.Avg60, _ = strconv.ParseFloat(v, 64)
			case "avg300":
				dst.Avg300, _ = strconv.ParseFloat(v, 64)
			case "total":
				dst.Total, _ = strconv.ParseUint(v, 10, 64)
			}
		}
	}
	if !found {
		return nil
	}
	return &p
}
