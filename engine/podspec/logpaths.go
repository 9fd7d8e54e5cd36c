package podspec

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// The log paths of a pod's containers, as kubelet lays them out:
//
//	<PodLogsDir>/<namespace>_<pod>_<uid>/<container>/<restartCount>.log
//	<LogLinksDir>/<pod>_<namespace>_<container>-<containerID>.log -> the above
//
// The first is the runtime's file (the sandbox's LogDirectory, the
// container's LogPath); the second is the link log shippers tail
// (/var/log/containers/*.log), one per container instance.

// maxLinkName is the longest file name ext4 takes; a longer link name is
// cut to it before its ".log", as kubelet's logSymlink cuts it.
const maxLinkName = 255

// ContainerLogDir is the directory of container's log files in the pod's
// log directory podLogDir (kubelet's BuildContainerLogsDirectory).
func ContainerLogDir(podLogDir, container string) string {
	return filepath.Join(podLogDir, container)
}

// LogLink is the path in linksDir of the link to the log of container
// instance id of container in pod namespace/name (kubelet's
// legacyLogSymlink): <name>_<namespace>_<container>-<id>.log, its name cut
// to 255 bytes. "" when linksDir is.
func LogLink(linksDir, namespace, name, container, id string) string {
	if linksDir == "" {
		return ""
	}
	base := name + "_" + namespace + "_" + container + "-" + id
	if len(base) > maxLinkName-len(".log") {
		base = base[:maxLinkName-len(".log")]
	}
	return filepath.Join(linksDir, base+".log")
}

// logFileName is the name of a container's log file, rotated ones
// included: <restartCount>.log, <restartCount>.log.<suffix>.
var logFileName = regexp.MustCompile(`^(\d+)\.log(\..*)?$`)

// RestartCountFromLogs is the restart count of the next instance of a
// container none of whose instances the runtime still has, read from the
// log files left in its log directory dir: one more than the highest
// <n>.log, 0 when dir is empty or missing (kubelet's
// calcRestartCountByLogDir; so a static pod re-added with its UID, whose
// containers went with the old pod, counts on from the old instances).
func RestartCountFromLogs(dir string) int32 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var next int32
	for _, e := range entries {
		m := logFileName.FindStringSubmatch(e.Name())
		if e.IsDir() || m == nil {
			continue
		}
		n, err := strconv.ParseInt(m[1], 10, 32)
		if err != nil || n >= 1<<31-1 {
			continue
		}
		next = max(next, int32(n)+1)
	}
	return next
}
