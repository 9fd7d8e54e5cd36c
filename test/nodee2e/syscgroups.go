package nodee2e

import (
	"errors"
	"fmt"

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

// placeRuntime moves the runtime (process pid, the containerd of the
// pass) into RuntimeCgroup before the agent starts, so that the agent's
// --system-cgroups leaves it there. The function it returns puts the
// host back as it was: the processes of the three cgroups at the root of
// each hierarchy again and the cgroups removed (a pass ends with the
// agent and the runtime stopped; what remains are the host's other
// processes the agent moved).
func placeRuntime(pid int) (release func() error, err error) {
	m, err := cgroups.New(cgroups.Options{})
	if err != nil {
		return nil, fmt.Errorf("system cgroups: %w", err)
	}
	if err := m.Join(RuntimeCgroup, pid); err != nil {
		return nil, fmt.Errorf("system cgroups: the runtime: %w", err)
	}
	return func() error {
		var errs []error
		for _, rel := range []string{RuntimeCgroup, KubeletCgroup, SystemCgroup} {
			errs = append(errs, m.Release(rel))
		}
		return errors.Join(errs...)
	}, nil
}
