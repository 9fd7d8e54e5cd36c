// Package cgroups owns kubelet's cgroup hierarchy on the cgroupfs driver
// (--cgroups-per-qos): the node-level "kubepods" cgroup (limited to node
// allocatable with --enforce-node-allocatable=pods), its QoS children
// "kubepods/burstable" and "kubepods/besteffort", and one "pod<uid>" cgroup
// per pod under the parent of its QoS class (Guaranteed pods directly under
// kubepods). The pod cgroup is the CgroupParent of the pod's sandbox and
// containers; the runtime creates the containers' cgroups inside it.
//
// Both cgroup v1 (one directory per mounted controller hierarchy) and
// cgroup v2 (one unified tree, controllers enabled in subtree_control) are
// handled; which one is in use is read from the filesystem at Root.
//
// # Usage
//
//	m, err := cgroups.New(cgroups.Options{Root: "/sys/fs/cgroup"})
//	err = m.Setup(allocatable, true)       // kubepods, burstable, besteffort
//	parent := m.Parent(pod)                // "/kubepods/burstable/pod<uid>"
//	err = m.Ensure(pod)                    // create pod<uid>, write its limits
//	err = m.Remove(pod.UID)                // after every process of the pod is gone
package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/speclet/speclet/engine/resources"
)

// Names of the hierarchy, as kubelet names them on cgroupfs.
const (
	KubePods   = "kubepods"
	Burstable  = "burstable"
	BestEffort = "besteffort"
	podPrefix  = "pod"
)

// Options configure a Manager.
type Options struct {
	// Root is where the cgroup filesystems are mounted; default
	// /sys/fs/cgroup.
	Root string
	// Mountinfo is read to find the v1 controller hierarchies under Root;
	// default /proc/self/mountinfo.
	Mountinfo string
	// Parent is the cgroup the hierarchy is made in (kubelet's
	// --cgroup-root): "/" (the default) gives /kubepods, "/node-a" gives
	// /node-a/kubepods. It must be absolute.
	Parent string
	// Proc is where the processes are listed (Adopt tells kernel threads
	// by their missing executable); default /proc.
	Proc string
}

// Manager creates and removes the QoS and pod cgroups. It is safe for
// concurrent use (pod workers call Ensure and Remove in parallel).
type Manager struct {
	v2     bool
	parent string // Options.Parent, "" for the root
	root   string // v2: the unified mount
	hiers  []hier // v1: one per mounted controller hierarchy
	// unified is, on v1, the controller-less cgroup2 mount of a hybrid
	// host ("/sys/fs/cgroup/unified"), "" when there is none. runc makes
	// every container's cgroup there too, parents included, and removes
	// only its own: the pod's directory there is ours to remove.
	unified string
	proc    string // Options.Proc
	mu      sync.Mutex
	burst   map[types.UID]uint64 // cpu.shares of each Burstable pod, summed into kubepods/burstable
}

// hier is one v1 hierarchy: its mount point and the controllers it carries.
type hier struct {
	dir   string
	ctrls map[string]bool
}

// New finds the cgroup filesystems under o.Root. It fails when there is none
// or when the root is not writable.
func New(o Options) (*Manager, error) {
	if o.Root == "" {
		o.Root = "/sys/fs/cgroup"
	}
	if o.Mountinfo == "" {
		o.Mountinfo = "/proc/self/mountinfo"
	}
	if o.Proc == "" {
		o.Proc = "/proc"
	}
	parent := strings.TrimRight(o.Parent, "/")
	if o.Parent != "" && (!strings.HasPrefix(o.Parent, "/") || filepath.Clean(o.Parent) != o.Parent) {
		return nil, fmt.Errorf("cgroups: parent %q: want a clean absolute cgroup path such as /node-a", o.Parent)
	}
	if _, err := os.Stat(filepath.Join(o.Root, "cgroup.controllers")); err == nil {
		return &Manager{v2: true, root: o.Root, parent: parent, proc: o.Proc, burst: map[types.UID]uint64{}}, nil
	}
	hiers, unified, err := v1Hierarchies(o.Mountinfo, o.Root)
	if err != nil {
		return nil, err
	}
	if len(hiers) == 0 {
		return nil, fmt.Errorf("cgroups: no cgroup v1 controller and no cgroup v2 filesystem under %s", o.Root)
	}
	return &Manager{hiers: hiers, unified: unified, parent: parent, proc: o.Proc, burst: map[types.UID]uint64{}}, nil
}

// V2 reports whether the unified hierarchy (cgroup v2) is in use.
func (m *Manager) V2() bool { return m.v2 }

// v1Hierarchies returns the v1 controller hierarchies mounted directly
// under root and the hybrid cgroup2 mount there ("" when none).
func v1Hierarchies(mountinfo, root string) ([]hier, string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, "", fmt.Errorf("cgroups: read mounts: %w", err)
	}
	defer f.Close()
	var out []hier
	unified := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts ... - fstype source superopts
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(fields) || (fields[sep+1] != "cgroup" && fields[sep+1] != "cgroup2") {
			continue
		}
		dir := fields[4]
		if filepath.Dir(dir) != filepath.Clean(root) {
			continue
		}
		if fields[sep+1] == "cgroup2" {
			unified = dir
			continue
		}
		ctrls := map[string]bool{}
		for _, o := range strings.Split(fields[sep+3], ",") {
			switch o {
			case "cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb", "blkio", "devices", "freezer", "net_cls", "net_prio", "perf_event", "rdma", "misc":
				ctrls[o] = true
			}
		}
		if len(ctrls) > 0 { // named hierarchies (name=systemd) are the init system's
			out = append(out, hier{dir: dir, ctrls: ctrls})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, "", fmt.Errorf("cgroups: read mounts: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	return out, unified, nil
}

// QoSPath is the cgroup of a QoS class relative to the root:
// "/kubepods" for Guaranteed, "/kubepods/burstable", "/kubepods/besteffort".
func QoSPath(class v1.PodQOSClass) string {
	switch class {
	case v1.PodQOSBurstable:
		return "/" + KubePods + "/" + Burstable
	case v1.PodQOSBestEffort:
		return "/" + KubePods + "/" + BestEffort
	}
	return "/" + KubePods
}

// qos is the cgroup of a QoS class under the manager's parent.
func (m *Manager) qos(class v1.PodQOSClass) string {
	return m.parent + QoSPath(class)
}

// PodsCgroup is the pods' cgroup ("<parent>/kubepods") relative to the root.
func (m *Manager) PodsCgroup() string { return m.qos(v1.PodQOSGuaranteed) }

// Parent is the pod's cgroup relative to the root, the CgroupParent of its
// sandbox: "<parent><QoSPath>/pod<uid>".
func (m *Manager) Parent(pod *v1.Pod) string {
	return m.qos(resources.QOSClass(pod)) + "/" + podPrefix + string(pod.UID)
}

// Setup creates kubepods, kubepods/burstable and kubepods/besteffort (it is
// idempotent). kubepods gets the CPU shares of allocatable CPU and, when
// enforce is set (--enforce-node-allocatable=pods), the memory limit of
// allocatable memory and its hugepage limits; besteffort gets 2 shares.
func (m *Manager) Setup(allocatable v1.ResourceList, enforce bool) error {
	top := resources.CgroupConfig{}
	if cpu, ok := allocatable[v1.ResourceCPU]; ok {
		s := resources.MilliCPUToShares(cpu.MilliValue())
		top.CPUShares = &s
	}
	if enforce {
		if mem, ok := allocatable[v1.ResourceMemory]; ok {
			v := mem.Value()
			top.Memory = &v
		}
		top.HugePages = resources.HugePageLimits(allocatable)
	}
	if err := m.create(m.qos(v1.PodQOSGuaranteed), top); err != nil {
		return err
	}
	two := uint64(resources.MinShares)
	if err := m.create(m.qos(v1.PodQOSBestEffort), resources.CgroupConfig{CPUShares: &two}); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.create(m.qos(v1.PodQOSBurstable), resources.CgroupConfig{CPUShares: ptr(m.burstableShares())})
}

// Ensure creates the pod's cgroup under its QoS parent, or updates it, with
// kubelet's pod settings (resources.PodConfig), and adds a Burstable pod's
// CPU request to kubepods/burstable.
func (m *Manager) Ensure(pod *v1.Pod) error {
	cfg := resources.PodConfig(pod)
	if err := m.create(m.Parent(pod), cfg); err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if resources.QOSClass(pod) != v1.PodQOSBurstable {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.burst[pod.UID] = *cfg.CPUShares
	return m.write(m.qos(v1.PodQOSBurstable), resources.CgroupConfig{CPUShares: ptr(m.burstableShares())})
}

// burstableShares sums the Burstable pods' shares (kubelet's QoS manager);
// m.mu is held.
func (m *Manager) burstableShares() uint64 {
	var sum uint64
	for _, s := range m.burst {
		sum += s
	}
	return max(sum, resources.MinShares)
}

// Remove removes the pod's cgroup (and any cgroup the runtime left inside
// it) from every hierarchy, under whichever QoS parent it is. A cgroup that
// still holds a process cannot be removed: the error says so. Removing a
// cgroup that does not exist is no error.
func (m *Manager) Remove(uid types.UID) error {
	var errs []error
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		rel := m.qos(class) + "/" + podPrefix + string(uid)
		for _, dir := range m.podDirs(rel) {
			errs = append(errs, removeTree(dir))
		}
	}
	m.mu.Lock()
	_, had := m.burst[uid]
	delete(m.burst, uid)
	if had {
		errs = append(errs, m.write(m.qos(v1.PodQOSBurstable), resources.CgroupConfig{CPUShares: ptr(m.burstableShares())}))
	}
	m.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove cgroup of pod %s: %w", uid, err)
	}
	return nil
}

// settle is how old a pod cgroup must be to be listed by Pods: a younger one
// may belong to a pod another agent on the machine is about to start.
const settle = time.Minute

// Pods lists the UIDs of the pod cgroups that exist, in every QoS parent,
// and are older than a minute (housekeeping removes those of pods that are
// gone; a fresh one may be about to get its sandbox), leaving out the UIDs
// skip reports (nil: none). A skipped or already listed UID costs no stat:
// a pass over running pods reads directories only (their age is a stat of
// each pod cgroup in every hierarchy).
func (m *Manager) Pods(skip func(types.UID) bool) ([]types.UID, error) {
	seen := map[types.UID]bool{}
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		for _, dir := range m.podDirs(m.qos(class)) {
			ents, err := os.ReadDir(dir)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("list pod cgroups: %w", err)
			}
			for _, e := range ents {
				if !e.IsDir() || !strings.HasPrefix(e.Name(), podPrefix) {
					continue
				}
				uid := types.UID(strings.TrimPrefix(e.Name(), podPrefix))
				if seen[uid] || (skip != nil && skip(uid)) {
					continue
				}
				if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < settle {
					continue
				}
				seen[uid] = true
			}
		}
	}
	out := make([]types.UID, 0, len(seen))
	for uid := range seen {
		out = append(out, uid)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// Dir is the directory of cgroup rel for controller ctrl ("memory", "cpu",
// ...): on v2 the unified directory, on v1 the one in the hierarchy that
// carries ctrl; "" when no hierarchy carries it. ctrl "" is the cgroup2
// directory: on v2 the unified one, on a v1 host the hybrid cgroup2 mount
// (where the kernel keeps each cgroup's pressure files), "" without one.
func (m *Manager) Dir(ctrl, rel string) string {
	if m.v2 {
		return filepath.Join(m.root, rel)
	}
	if ctrl == "" {
		if m.unified == "" {
			return ""
		}
		return filepath.Join(m.unified, rel)
	}
	for _, h := range m.hiers {
		if h.ctrls[ctrl] {
			return filepath.Join(h.dir, rel)
		}
	}
	return ""
}

// podDirs is rel in every hierarchy and, on a hybrid host, in the unified
// mount, where runc leaves the pod's directory behind (see unified): rel
// under each of mounts.
func (m *Manager) podDirs(rel string) []string {
	mnts := m.mounts()
	out := make([]string, len(mnts))
	for i, mnt := range mnts {
		out[i] = filepath.Join(mnt, rel)
	}
	return out
}

// mounts are the mount points of every hierarchy and, on a hybrid host,
// the unified mount.
func (m *Manager) mounts() []string {
	if m.v2 {
		return []string{m.root}
	}
	out := make([]string, 0, len(m.hiers)+1)
	for _, h := range m.hiers {
		out = append(out, h.dir)
	}
	if m.unified != "" {
		out = append(out, m.unified)
	}
	return out
}

func ptr[T any](v T) *T { return &v }
