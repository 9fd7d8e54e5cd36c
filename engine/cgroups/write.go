// Writing cgroup directories and their limit files.

package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/speclet/speclet/engine/resources"
)

// create makes rel (and its parents) in every hierarchy and writes cfg.
func (m *Manager) create(rel string, cfg resources.CgroupConfig) error {
	if m.v2 {
		if err := m.mkdirV2(rel); err != nil {
			return err
		}
	} else {
		for _, h := range m.hiers {
			if err := mkdirV1(h, rel); err != nil {
				return err
			}
		}
	}
	return m.write(rel, cfg)
}

func mkdirV1(h hier, rel string) error {
	dir := h.dir
	for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
		parent := dir
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil {
			if errors.Is(err, fs.ErrExist) {
				continue
			}
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		if h.ctrls["cpuset"] { // a new cpuset has no CPUs and no memory nodes: inherit them
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if err := copyIfEmpty(filepath.Join(parent, f), filepath.Join(dir, f)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func copyIfEmpty(from, to string) error {
	cur, err := os.ReadFile(to)
	if err != nil {
		return fmt.Errorf("read %s: %w", to, err)
	}
	if strings.TrimSpace(string(cur)) != "" {
		return nil
	}
	v, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("read %s: %w", from, err)
	}
	return writeFile(to, strings.TrimSpace(string(v)))
}

// mkdirV2 creates rel and enables the controllers of the root in the
// subtree_control of every level above it.
func (m *Manager) mkdirV2(rel string) error {
	avail, err := os.ReadFile(filepath.Join(m.root, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("read cgroup controllers: %w", err)
	}
	var enable []string
	for _, c := range strings.Fields(string(avail)) {
		switch c {
		case "cpu", "cpuset", "memory", "pids", "hugetlb", "io":
			enable = append(enable, "+"+c)
		}
	}
	dir := m.root
	for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
		if len(enable) > 0 {
			if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), strings.Join(enable, " ")); err != nil {
				return err
			}
		}
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// write sets cfg's values in rel.
func (m *Manager) write(rel string, cfg resources.CgroupConfig) error {
	var errs []error
	set := func(ctrl, file, val string) {
		dir := m.Dir(ctrl, rel)
		if dir == "" {
			return // the controller is not mounted: nothing to enforce
		}
		errs = append(errs, writeFile(filepath.Join(dir, file), val))
	}
	if m.v2 {
		if cfg.CPUShares != nil {
			set("cpu", "cpu.weight", strconv.FormatUint(resources.SharesToWeight(*cfg.CPUShares), 10))
		}
		if cfg.CPUQuota != nil && cfg.CPUPeriod != nil {
			q := "max"
			if *cfg.CPUQuota > 0 {
				q = strconv.FormatInt(*cfg.CPUQuota, 10)
			}
			set("cpu", "cpu.max", q+" "+strconv.FormatUint(*cfg.CPUPeriod, 10))
		}
		if cfg.Memory != nil {
			set("memory", "memory.max", limitString(*cfg.Memory, "max"))
		}
		for size, lim := range cfg.HugePages {
			set("hugetlb", "hugetlb."+resources.HugePageSizeString(size)+".max", limitString(lim, "max"))
		}
		return errors.Join(errs...)
	}
	if cfg.CPUShares != nil {
		set("cpu", "cpu.shares", strconv.FormatUint(*cfg.CPUShares, 10))
	}
	if cfg.CPUQuota != nil && cfg.CPUPeriod != nil {
		set("cpu", "cpu.cfs_period_us", strconv.FormatUint(*cfg.CPUPeriod, 10))
		set("cpu", "cpu.cfs_quota_us", strconv.FormatInt(*cfg.CPUQuota, 10))
	}
	if cfg.Memory != nil {
		set("memory", "memory.limit_in_bytes", limitString(*cfg.Memory, "-1"))
	}
	for size, lim := range cfg.HugePages {
		set("hugetlb", "hugetlb."+resources.HugePageSizeString(size)+".limit_in_bytes", limitString(lim, "-1"))
	}
	return errors.Join(errs...)
}

// limitString: 0 means no limit.
func limitString(v int64, unlimited string) string {
	if v <= 0 {
		return unlimited
	}
	return strconv.FormatInt(v, 10)
}

func writeFile(path, val string) error {
	if err := os.WriteFile(path, []byte(val), 0o644); err != nil {
		return fmt.Errorf("write %q to %s: %w", val, path, err)
	}
	return nil
}

// removeTree removes cgroup dir and the cgroups inside it, deepest first.
func removeTree(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		if e.IsDir() {
			errs = append(errs, removeTree(filepath.Join(dir, e.Name())))
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove %s (a process of the pod may still run): %w", dir, err))
	}
	return errors.Join(errs...)
}
