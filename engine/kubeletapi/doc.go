// Package kubeletapi is speclet's authenticated kubelet API, the one kubelet
// serves on port 10250 and kube-apiserver calls for `kubectl logs`, `exec`,
// `attach` and `port-forward`:
//
//	GET  /healthz, /metrics, /pods, /runningpods/, /configz (Config.Configz)
//	GET  /stats/summary, /metrics/cadvisor, /metrics/resource, /metrics/probes
//	     (also on the read-only port, without authentication: ReadOnlyHandler)
//	GET  /containerLogs/{ns}/{pod}/{container}?follow&tailLines&limitBytes&sinceSeconds&sinceTime&timestamps&previous
//	GET|POST /exec/{ns}/{pod}[/{uid}]/{container}?command=...&stdin&stdout&stderr&tty
//	GET|POST /attach/{ns}/{pod}[/{uid}]/{container}?stdin&stdout&stderr&tty
//	GET|POST /portForward/{ns}/{pod}[/{uid}]?port=...
//	POST /run/{ns}/{pod}[/{uid}]/{container}?cmd=...
//
// Contracts:
//   - TLS only (TLSConfig); a request is authenticated by a client
//     certificate verified against the client CA (CN = user, O = groups), else
//     by a bearer token the TokenReviewer accepts, else, when Anonymous is on,
//     as system:anonymous; otherwise it gets 401.
//   - It is then authorized as kubelet does: verb from the method (GET get,
//     POST create, ...), resource nodes, name the node, subresource stats,
//     metrics or log for /stats, /metrics and /logs, healthz, pods or configz
//     (each falling back to proxy) for those paths, proxy for everything
//     else; a refusal is 403.
//   - CachedTokens and CachedAuthorizer keep review answers as kubelet does
//     (a token 2m, an allowed request 5m, a refused one 30s by default;
//     errors are not kept), by an injected clock.
//   - TLSConfigFunc serves a certificate that changes while the server runs
//     (engine/servingcert's, renewed through the cluster).
//   - A pod not on this node is 404; a container that is not running, 400.
//   - Logs are read from the CRI log files (time stream tag content, P for a
//     partial line) across rotated files (<log>.<timestamp>, oldest first);
//     previous is the container created before the newest one.
//   - /stats/summary is the node (CPU from /proc/stat, memory from
//     /proc/meminfo, file system of the root dir) and each ready sandbox with
//     its running containers from the CRI's ListContainerStats (the pod's own
//     numbers from ListPodSandboxStats when the runtime has them, else the
//     sum of its containers'), completed from the cgroups (engine/cgroupstats)
//     and file systems where the CRI is silent (summary's comment says
//     what is left out); /metrics/resource is the same in the Prometheus
//     text format metrics-server reads; /metrics/cadvisor is cAdvisor's
//     series of the root, pod, sandbox and container cgroups (cadvisor.go);
//     /metrics/probes is Config.Probes (kubelet's prober series).
//   - The three are served from one housekeeping pass (StatsCache): the
//     runtime's container stats and the cgroup readings of one time, reused
//     for DefaultStatsMaxAge (cAdvisor's housekeeping interval in kubelet)
//     while the runtime lists the same ready sandboxes and running
//     containers, so that repeated scrapes do not each read every cgroup.
//   - Exec, attach and port-forward ask the runtime for a streaming URL and
//     proxy the connection there, upgrades included, as kubelet v1.34 does.
//   - Streams outlive the server's timeouts: container logs (followed or
//     not), exec, attach and port-forward lift the read and write deadlines
//     of their request (http.ResponseController); an upgraded connection
//     has none. Everything else is bounded by the server's (engine/server
//     Limits).
//   - A 401 closes the connection after the answer ("Connection: close"):
//     a caller without credentials holds no connection.
//
// The CRI calls it makes are reads and the streaming calls (Exec, Attach,
// PortForward prepare the user's session), plus ExecSync for /run: they are
// the user's requests, not lifecycle effects, so they are not spec actions.
// Each route that calls the runtime is a handler of caller kubelet_api in
// spec/callers.hcl, which lists the CRI methods it may call; the route runs
// with its request context tagged with that handler (fsm.Handler.Tag), so
// the CRI audit (engine/criaudit) checks its calls like an action's.
package kubeletapi
