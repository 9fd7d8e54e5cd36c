# The callers of the runtime outside the machines: what speclet asks of the
# CRI that is no lifecycle effect. The kubelet API serves a user's request
# (logs, exec, attach, port-forward, /run, stats): the command an exec or
# /run starts is the user's, and what it changes in a container is theirs.
# Log rotation renames a running container's log file and has the runtime
# reopen it: it changes the runtime's file handle, never a container's
# state. None of them is a machine's action, and none drives a machine.
#
# Each handler is an entry point (an HTTP route, a periodic pass) and the
# CRI methods the calls made under it may use. The code tags the context of
# each handler with fsm.Handler<Caller><Handler>.Tag, as the generated
# Run<Machine>Action tags an action's, so that the CRI audit
# (engine/criaudit) checks these calls against their cri lists as it checks
# the actions': a call inside a handler must be declared here, reads too,
# and a mutating call outside every action and handler is a violation.
#
# Rules that are not declarations, and where the code keeps them:
#  - A caller never calls a method that creates, starts, stops or removes a
#    sandbox, a container or an image: those are the machines' (the audit
#    reports any such call of a handler as undeclared).
#  - The kubelet API authenticates and authorizes a request before any
#    handler runs (engine/kubeletapi ServeHTTP); a refused request makes no
#    CRI call.
#  - Every caller reaches the runtime through the one runtime `speclet run`
#    builds: the CRI audit log (--cri-audit-log) and the runtime call
#    metrics see its calls like the engine's.

caller "kubelet_api" {
  doc = "The authenticated kubelet API on --port (engine/kubeletapi), on behalf of the API server and kubectl."

  handler "container_logs" {
    doc = "GET /containerLogs/{ns}/{pod}/{container}: the newest (or, with previous, the one before) instance of the container, its log path, and whether it still runs while a follow streams the file."
    cri = ["ListContainers", "ContainerStatus"]
  }
  handler "exec" {
    doc = "GET|POST /exec/...: the running instance of the container, then Exec prepares the user's session, which the API proxies to the runtime's streaming server."
    cri = ["ListContainers", "Exec"]
  }
  handler "attach" {
    doc = "GET|POST /attach/...: the running instance of the container, then Attach prepares the user's session to its stdio."
    cri = ["ListContainers", "Attach"]
  }
  handler "port_forward" {
    doc = "GET|POST /portForward/...: the pod's ready sandbox, then PortForward prepares the user's session into its network namespace."
    cri = ["ListPodSandbox", "PortForward"]
  }
  handler "run" {
    doc = "POST /run/...: the running instance of the container, then ExecSync runs the user's command and returns its output."
    cri = ["ListContainers", "ExecSync"]
  }
  handler "running_pods" {
    doc = "GET /runningpods/: the ready sandboxes and running containers, grouped by their pod labels."
    cri = ["ListPodSandbox", "ListContainers"]
  }
  handler "stats_summary" {
    doc = "GET /stats/summary (both ports): the ready sandboxes, running containers and their usage (ListPodSandboxStats when the runtime has it), the runtime's image filesystem."
    cri = ["ListPodSandbox", "ListContainers", "ListContainerStats", "ListPodSandboxStats", "ImageFsInfo"]
  }
  handler "metrics_resource" {
    doc = "GET /metrics/resource (both ports): the summary of /stats/summary in the Prometheus text format."
    cri = ["ListPodSandbox", "ListContainers", "ListContainerStats", "ListPodSandboxStats", "ImageFsInfo"]
  }
  handler "metrics_cadvisor" {
    doc = "GET /metrics/cadvisor (both ports): the ready sandboxes and running containers, whose cgroups it reads, and their writable layers' usage."
    cri = ["ListPodSandbox", "ListContainers", "ListContainerStats"]
  }
}

caller "log_rotation" {
  doc = "Container log rotation (engine/containerlogs; --container-log-max-size, --container-log-max-files)."

  handler "rotate_once" {
    doc = "Rotator.RotateOnce, every 10 s: the running containers and their log paths; a log at or above the maximum size is renamed and ReopenContainerLog has the runtime write a new file at the path."
    cri = ["ListContainers", "ContainerStatus", "ReopenContainerLog"]
  }
}
