package nodee2e

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"

	"github.com/speclet/speclet/engine/cgroups"
)

// The system containers of the Summary API, as the node e2e jobs set
// them up for kubelet on a host without systemd (e2e_node's
// services/kubelet.go): the agent in KubeletCgroup, the runtime in
// RuntimeCgroup, every other process of the root cgroup in SystemCgroup.
// The agent moves itself and the root's processes (--kubelet-cgroups,
// --system-cgroups); the runtime is put in its cgroup by the host, here
// placeRuntime.
const (
	KubeletCgroup = "/kubelet"
	RuntimeCgroup = "/runtime"
	SystemCgroup  = "/system"
)

// placeRuntime notes where every process of the host is, then moves the
// runtime (process pid, the containerd of the pass) into RuntimeCgroup
// before the agent starts, so that the agent's --system-cgroups leaves it
// there. The function it returns puts the host back as it found it: each
// process that is still there back in its cgroups (the agent moved the
// host's processes out of theirs, in every hierarchy, as kubelet does),
// the processes started since at the root, and the three cgroups removed.
func placeRuntime(pid int) (restore func() error, err error) {
	m, err := cgroups.New(cgroups.Options{})
	if err != nil {
		return nil, fmt.Errorf("system cgroups: %w", err)
	}
	before := map[int]map[string]string{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("system cgroups: %w", err)
	}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if where, err := m.Where(p); err == nil {
			before[p] = where
		}
	}
	if err := m.Join(RuntimeCgroup, pid); err != nil {
		return nil, fmt.Errorf("system cgroups: the runtime: %w", err)
	}
	return func() error {
		var errs []error
		for p, where := range before {
			now, err := m.Where(p)
			if err != nil || maps.Equal(now, where) {
				continue // gone, or not moved
			}
			if err := m.Put(p, where); err != nil {
				errs = append(errs, err)
			}
		}
		for _, rel := range []string{RuntimeCgroup, KubeletCgroup, SystemCgroup} {
			errs = append(errs, m.Release(rel))
		}
		return errors.Join(errs...)
	}, nil
}
