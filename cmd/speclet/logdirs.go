package main

import (
	"flag"
	"fmt"
	"path/filepath"
)

// checkLogDirs checks --pod-logs-dir and --container-log-links-dir, whose
// defaults are kubelet's /var/log/pods and /var/log/containers, or, with
// the simulated runtime (which writes no logs), directories under
// --root-dir. Each must be an absolute path other than /, and they differ.
func (o *runOptions) checkLogDirs(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.runtime == "sim" {
		if !set["pod-logs-dir"] {
			o.podLogsDir = filepath.Join(o.rootDir, "logs")
		}
		if !set["container-log-links-dir"] {
			o.containerLogLinksDir = filepath.Join(o.rootDir, "containers")
		}
	}
	for _, d := range []struct{ name, v string }{{"--pod-logs-dir", o.podLogsDir}, {"--container-log-links-dir", o.containerLogLinksDir}} {
		if !filepath.IsAbs(d.v) || filepath.Clean(d.v) == "/" {
			return fmt.Errorf("%s: %q: want an absolute directory other than /", d.name, d.v)
		}
	}
	o.podLogsDir, o.containerLogLinksDir = filepath.Clean(o.podLogsDir), filepath.Clean(o.containerLogLinksDir)
	if o.podLogsDir == o.containerLogLinksDir {
		return fmt.Errorf("--container-log-links-dir: %q: the same directory as --pod-logs-dir", o.containerLogLinksDir)
	}
	return nil
}
