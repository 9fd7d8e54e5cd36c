package main

import (
	"context"
	"log/slog"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/speclet/speclet/engine/oomwatch"
)

// kmsgPath is the kernel log the OOM watcher reads.
const kmsgPath = "/dev/kmsg"

// startOOMWatch runs kubelet's OOM watcher until ctx ends: every OOM kill
// the kernel reports from now on is logged, and a system OOM (the kill
// enforced no cgroup's limit) is recorded on the Node as a Warning
// SystemOOM event (with --kubeconfig). Without a readable /dev/kmsg it
// logs why it is off and returns.
func startOOMWatch(ctx context.Context, wg *sync.WaitGroup, api *apiClient, log *slog.Logger) {
	src, err := oomwatch.OpenKmsg(kmsgPath)
	if err != nil {
		log.Warn("OOM watcher off: SystemOOM events are not recorded", "path", kmsgPath, "err", err)
		return
	}
	log.Info("OOM watcher reading the kernel log", "path", kmsgPath)
	wg.Add(2)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		src.Close()
	}()
	go func() {
		defer wg.Done()
		err := oomwatch.Watch(src, func(k oomwatch.Kill) {
			reason, msg, system := oomwatch.SystemOOM(k)
			log.Info("OOM kill reported by the kernel", "pid", k.Pid, "process", k.Process, "cgroup", k.Cgroup,
				"task-cgroup", k.TaskCgroup, "system", system)
			if system {
				api.nodeEvent(v1.EventTypeWarning, reason, msg)
			}
		})
		if err != nil && ctx.Err() == nil {
			log.Error("OOM watcher stopped: SystemOOM events are no longer recorded", "path", kmsgPath, "err", err)
		}
	}()
}
