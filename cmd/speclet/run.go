package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/api/resource"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/engine"
	"github.com/speclet/speclet/engine/apierr"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/containergc"
	"github.com/speclet/speclet/engine/containerlogs"
	"github.com/speclet/speclet/engine/criaudit"
	"github.com/speclet/speclet/engine/imagegc"
	"github.com/speclet/speclet/engine/kubeletapi"
	"github.com/speclet/speclet/engine/podspec"
	"github.com/speclet/speclet/engine/server"
)

func init() { register("run", "run the node agent", runMain) }

// runOptions are the flags of `speclet run`, checked.
type runOptions struct {
	// evictionPeriod is engine.Config.EvictionPeriod; no flag sets it
	// (kubelet's is fixed at 10 s): 0 is the engine's default, tests
	// shorten it.
	evictionPeriod       time.Duration
	endpoint             string
	runtime              string // "remote" or "sim"
	manifestPath         string
	manifestURL          string
	nodeName             string
	nodeIP               string
	clusterDNS           ipList
	clusterDomain        string
	resolvConf           string
	rootDir              string
	address              string
	readOnlyAddress      string // "": see readOnlyAddr
	readOnlyPort         int
	healthzBindAddress   string
	healthzPort          int
	enableProfiling      bool
	syncFrequency        time.Duration
	crashLoopBackOffBase time.Duration
	imagePullBackOffBase time.Duration
	requestTimeout       time.Duration
	fileCheckFrequency   time.Duration
	httpCheckFrequency   time.Duration
	runtimeWait          time.Duration
	verbosity            int
	logFormat            string
	criAuditLog          string
	maxPods              int
	unsafeSysctls        string
	sysctls              *podspec.Sysctls
	node                 nodeOptions
	minContainerTTL      time.Duration
	maxDeadPerContainer  int
	maxDead              int
	imageGCHigh          int
	imageGCLow           int
	minImageTTL          time.Duration
	kubeconfig           string
	kubeAPIQPS           float64
	kubeAPIBurst         int
	nodeLeaseDuration    int
	eventQPS             float64
	eventBurst           int
	nodeStatusUpdate     time.Duration
	nodeStatusReport     time.Duration

	// the kubelet API (--port)
	port                     int
	tlsCertFile              string
	tlsPrivateKeyFile        string
	clientCAFile             string
	anonymousAuth            bool
	authorizationMode        string
	rotateServerCertificates bool
	tokenCacheTTL            time.Duration
	authorizedCacheTTL       time.Duration
	unauthorizedCacheTTL     time.Duration

	containerLogMaxSize  string
	containerLogMaxFiles int
	logMaxSizeBytes      int64
	podLogsDir           string
	containerLogLinksDir string
	devicePluginsDir     string
}

// ipList is a flag of IP addresses, repeatable and comma-separated.
type ipList []string

func (l *ipList) String() string { return strings.Join(*l, ",") }

func (l *ipList) Set(v string) error {
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if net.ParseIP(a) == nil {
			return fmt.Errorf("%q is not an IP address", a)
		}
		*l = append(*l, a)
	}
	return nil
}

const defaultEndpoint = "unix:///run/containerd/containerd.sock"

// imageGC is the image GC policy of the flags.
// containerGC is the engine's container GC policy from the flags.
func (o *runOptions) containerGC() engine.ContainerGCPolicy {
	p := engine.ContainerGCPolicy{MinAge: o.minContainerTTL, MaxPerContainer: o.maxDeadPerContainer}
	if o.maxDead >= 0 {
		p.MaxContainers = &o.maxDead
	}
	return p
}

func (o *runOptions) imageGC() imagegc.Policy {
	return imagegc.Policy{High: o.imageGCHigh, Low: o.imageGCLow, MinAge: o.minImageTTL}
}

// imageFsPath is the directory measured for the image filesystem whose
// mountpoint the runtime names (ImageFsInfo): the mountpoint itself, except
// on the simulated runtime, which keeps no image on disk and names
// sim.ImageFsMountpoint, a path that does not exist: its images count as
// kept under --root-dir. Image GC (fsStat) and the imagefs eviction signals
// (nodeResources.signals) both measure through it.
func (o *runOptions) imageFsPath(mount string) string {
	if o.runtime == "sim" && mount == sim.ImageFsMountpoint {
		return o.rootDir
	}
	return mount
}

// fsStat measures the image filesystem for image GC: statfs of
// imageFsPath (nil on a real runtime: the engine's statfs of the mountpoint).
func (o *runOptions) fsStat() func(string) (uint64, uint64, error) {
	if o.runtime != "sim" {
		return nil
	}
	return func(path string) (uint64, uint64, error) { return engine.Statfs(o.imageFsPath(path)) }
}

// parseRunFlags parses and checks the flags; every error names its flag.
func parseRunFlags(args []string, stderr io.Writer) (*runOptions, error) {
	host, _ := os.Hostname()
	o := &runOptions{}
	fs := flag.NewFlagSet("speclet run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.endpoint, "container-runtime-endpoint", defaultEndpoint, "CRI endpoint of the container runtime (unix socket); ignored with --runtime=sim")
	fs.StringVar(&o.runtime, "runtime", "remote", "remote: the CRI runtime at --container-runtime-endpoint; sim: an in-process simulated runtime on a socket under --root-dir")
	fs.StringVar(&o.manifestPath, "pod-manifest-path", "", "directory of static pod manifests (YAML or JSON v1 Pods, one per file)")
	fs.StringVar(&o.manifestURL, "manifest-url", "", "URL serving a v1 Pod, PodList or List of static pods")
	fs.StringVar(&o.nodeIP, "node-ip", "", "address of this node in pod statuses (hostIP, podIP of hostNetwork pods) and the host of their probes; default: the first global unicast address")
	fs.Var(&o.clusterDNS, "cluster-dns", "IP address of a cluster DNS server (repeatable, or a comma-separated list): ClusterFirst pods resolve through them; without one they fall back to Default DNS with a MissingClusterDNS warning")
	fs.StringVar(&o.clusterDomain, "cluster-domain", "", "the cluster's domain (cluster.local): ClusterFirst pods search <namespace>.svc.<domain>, svc.<domain> and <domain> first")
	fs.StringVar(&o.resolvConf, "resolv-conf", "/etc/resolv.conf", "resolver file whose nameservers, searches and options Default DNS pods get (and ClusterFirst ones append its searches); \"\": none (nameserver 127.0.0.1)")
	fs.StringVar(&o.nodeName, "node-name", strings.ToLower(host), "name of this node; static pods are named <name>-<node-name>")
	fs.StringVar(&o.nodeName, "hostname-override", strings.ToLower(host), "the same as --node-name (kubelet's name for it)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the API server: join it as node --node-name (register the Node, renew its Lease, run the pods bound to it, write their status, mirror static pods); its identity must be system:node:<node-name> in group system:nodes; the kubelet API checks bearer tokens (TokenReview) and authorizes requests (SubjectAccessReview, --authorization-mode) there")
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", 50, "queries per second to the API server")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 100, "burst of queries to the API server")
	fs.IntVar(&o.nodeLeaseDuration, "node-lease-duration-seconds", 40, "duration of the node's Lease in kube-node-lease (renewed every quarter of it, as kubelet)")
	fs.Float64Var(&o.eventQPS, "event-qps", 50, "events per second created in the API server (a client of its own, as kubelet's, so that events do not slow status writes)")
	fs.IntVar(&o.eventBurst, "event-burst", 100, "burst of event creations")
	fs.DurationVar(&o.nodeStatusUpdate, "node-status-update-frequency", 10*time.Second, "how often the Node's status is computed; it is written only when it changed or --node-status-report-frequency passed")
	fs.DurationVar(&o.nodeStatusReport, "node-status-report-frequency", 5*time.Minute, "how often an unchanged Node status is written anyway; default 5m, or --node-status-update-frequency when only that is set (kubelet's)")
	fs.StringVar(&o.rootDir, "root-dir", "/var/lib/speclet", "directory for speclet's files")
	fs.StringVar(&o.address, "address", "127.0.0.1", "IP address the kubelet API (--port) listens on, and the read-only server too without --kubeconfig (see --read-only-address)")
	fs.StringVar(&o.readOnlyAddress, "read-only-address", "", "IP address the read-only server (--read-only-port: /pods with whole pod specs, /metrics, /debug/pods, no authentication) listens on; default: 127.0.0.1 with --kubeconfig (a node of a cluster does not serve it on --address, the address the API server reaches), --address without")
	fs.IntVar(&o.port, "port", 10250, "port of the authenticated kubelet API over TLS (logs, exec, attach, port-forward); 0 disables it")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "serving certificate of the kubelet API (PEM); default: a self-signed one under --root-dir/pki")
	fs.StringVar(&o.tlsPrivateKeyFile, "tls-private-key-file", "", "private key of --tls-cert-file")
	fs.StringVar(&o.clientCAFile, "client-ca-file", "", "CA bundle that verifies client certificates of the kubelet API (the CA of the API server's --kubelet-client-certificate)")
	fs.BoolVar(&o.anonymousAuth, "anonymous-auth", false, "let requests without credentials in as system:anonymous (they are still authorized)")
	fs.StringVar(&o.authorizationMode, "authorization-mode", "", "authorization of the kubelet API: Webhook (SubjectAccessReview on nodes/<subresource>; needs --kubeconfig) or AlwaysAllow (every authenticated request); default: Webhook with --kubeconfig, else AlwaysAllow")
	fs.BoolVar(&o.rotateServerCertificates, "rotate-server-certificates", false, "get the kubelet API's serving certificate from the cluster through a CertificateSigningRequest (signer kubernetes.io/kubelet-serving; it needs an approval) and renew it at 70-90% of its lifetime; stored in --root-dir/pki/kubelet-server-current.pem; needs --kubeconfig")
	fs.DurationVar(&o.tokenCacheTTL, "authentication-token-webhook-cache-ttl", kubeletapi.DefaultTokenCacheTTL, "how long a TokenReview answer is kept")
	fs.DurationVar(&o.authorizedCacheTTL, "authorization-webhook-cache-authorized-ttl", kubeletapi.DefaultAuthorizedCacheTTL, "how long an allowing SubjectAccessReview answer is kept")
	fs.DurationVar(&o.unauthorizedCacheTTL, "authorization-webhook-cache-unauthorized-ttl", kubeletapi.DefaultUnauthorizedCacheTTL, "how long a refusing SubjectAccessReview answer is kept")
	fs.IntVar(&o.readOnlyPort, "read-only-port", 10255, "port of the read-only HTTP server (GET /pods, /healthz, /metrics); 0 disables it")
	fs.StringVar(&o.healthzBindAddress, "healthz-bind-address", "127.0.0.1", "IP address the healthz server listens on (plain HTTP, GET and HEAD /healthz, no authentication)")
	fs.IntVar(&o.healthzPort, "healthz-port", 10248, "port of the healthz server; 0 disables it. A port that is taken is logged and tried again every 5s (the node runs meanwhile)")
	fs.BoolVar(&o.enableProfiling, "enable-profiling", false, "serve the Go runtime's profiles (net/http/pprof) under /debug/pprof/ on the read-only server; off by default, as that server has no authentication")
	fs.DurationVar(&o.syncFrequency, "sync-frequency", engine.DefaultSyncFrequency, "maximum time between resyncs of a running pod")
	fs.DurationVar(&o.crashLoopBackOffBase, "crashloop-backoff-base", engine.DefaultCrashLoopBackOffBase, "first CrashLoopBackOff delay; it doubles up to 300s")
	fs.DurationVar(&o.imagePullBackOffBase, "image-pull-backoff-base", engine.DefaultImagePullBackOffBase, "first ImagePullBackOff delay; it doubles up to 300s")
	fs.DurationVar(&o.requestTimeout, "runtime-request-timeout", cri.DefaultTimeout, "timeout of every CRI call except image pulls")
	fs.DurationVar(&o.fileCheckFrequency, "file-check-frequency", 20*time.Second, "how often --pod-manifest-path is checked besides inotify events (kubelet's default, 20s); with inotify a check lists the directory and every file is checked at least every 20s")
	fs.DurationVar(&o.httpCheckFrequency, "http-check-frequency", config.DefaultURLPeriod, "how often --manifest-url is fetched")
	fs.DurationVar(&o.runtimeWait, "runtime-wait", 30*time.Second, "how long to wait at start for the runtime to answer")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity: 0 lifecycle steps (SyncLoop ADD/UPDATE/REMOVE, container started/died/killed, pod removed) and problems; 2 also PLEG events and RECONCILE updates; 4 every machine transition and CRI-facing action; 6 also events a state ignores")
	fs.IntVar(&o.maxPods, "max-pods", 110, "the node's pods capacity: a pod beyond it is refused admission, Failed with reason OutOfpods (bounds what CRI list calls return)")
	fs.StringVar(&o.unsafeSysctls, "allowed-unsafe-sysctls", "", "comma-separated unsafe sysctls or patterns ending in * (kernel.msg*, net.core.somaxconn) pods may set besides the safe ones; a pod setting another is refused with SysctlForbidden")
	fs.StringVar(&o.containerLogMaxSize, "container-log-max-size", "10Mi", "a running container's log file is rotated when it reaches this size (a quantity: 10Mi, 500Ki)")
	fs.IntVar(&o.containerLogMaxFiles, "container-log-max-files", 5, "most log files kept per container, the current one included (at least 2)")
	fs.StringVar(&o.podLogsDir, "pod-logs-dir", "/var/log/pods", "directory of the pods' container logs, <namespace>_<pod>_<uid>/<container>/<restart>.log (kubelet's podLogsDir); with --runtime=sim, default <root-dir>/logs")
	fs.StringVar(&o.devicePluginsDir, "device-plugins-dir", kubeletDevicePluginsDir, "directory of the device plugins' registration socket kubelet.sock and their own sockets (kubelet's fixed "+kubeletDevicePluginsDir+", where plugins look); with --runtime=sim, default <root-dir>/device-plugins")
	fs.StringVar(&o.containerLogLinksDir, "container-log-links-dir", "/var/log/containers", "directory of the links <pod>_<namespace>_<container>-<id>.log to running containers' logs, which log shippers tail; with --runtime=sim, default <root-dir>/containers")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	o.node.flags(fs)
	fs.DurationVar(&o.minContainerTTL, "minimum-container-ttl-duration", 0, "container GC: a dead container instance younger than this is kept")
	fs.IntVar(&o.maxDeadPerContainer, "maximum-dead-containers-per-container", 1, "container GC: dead instances kept per container of a pod (the newest always stays, for lastState and logs --previous)")
	fs.IntVar(&o.maxDead, "maximum-dead-containers", -1, "container GC: dead container instances kept on the node, enforced every minute (-1: no limit); the newest dead instance of each container always stays")
	fs.IntVar(&o.imageGCHigh, "image-gc-high-threshold", 85, "image GC: percent of the image filesystem in use at or above which unused images are removed, least recently used first")
	fs.IntVar(&o.imageGCLow, "image-gc-low-threshold", 80, "image GC: percent of the image filesystem that removals bring usage down to")
	fs.DurationVar(&o.minImageTTL, "minimum-image-ttl-duration", 2*time.Minute, "image GC: an unused image first seen less than this long ago is kept")
	fs.StringVar(&o.criAuditLog, "cri-audit-log", "", "debugging aid: append every CRI call (method and the spec action making it) to this file as JSON lines, for engine/criaudit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))
	}
	switch o.runtime {
	case "remote", "sim":
	default:
		return nil, fmt.Errorf("--runtime: %q: want remote or sim", o.runtime)
	}
	if o.runtime == "remote" {
		if !strings.HasPrefix(o.endpoint, "unix://") && !filepath.IsAbs(o.endpoint) {
			return nil, fmt.Errorf("--container-runtime-endpoint: %q: want unix:///path/to.sock", o.endpoint)
		}
	}
	if o.nodeName == "" {
		return nil, errors.New("--node-name: empty (and the hostname is unknown)")
	}
	if msgs := validation.IsDNS1123Subdomain(o.nodeName); len(msgs) > 0 {
		return nil, fmt.Errorf("--node-name: %q: %s", o.nodeName, strings.Join(msgs, "; "))
	}
	if o.rootDir == "" {
		return nil, errors.New("--root-dir: empty")
	}
	if net.ParseIP(o.address) == nil {
		return nil, fmt.Errorf("--address: %q is not an IP address", o.address)
	}
	if o.readOnlyAddress != "" && net.ParseIP(o.readOnlyAddress) == nil {
		return nil, fmt.Errorf("--read-only-address: %q is not an IP address", o.readOnlyAddress)
	}
	if o.kubeAPIQPS <= 0 {
		return nil, fmt.Errorf("--kube-api-qps: %v: want a positive number", o.kubeAPIQPS)
	}
	if o.kubeAPIBurst <= 0 {
		return nil, fmt.Errorf("--kube-api-burst: %d: want a positive number", o.kubeAPIBurst)
	}
	if o.nodeLeaseDuration <= 0 {
		return nil, fmt.Errorf("--node-lease-duration-seconds: %d: want a positive number", o.nodeLeaseDuration)
	}
	if o.eventQPS <= 0 {
		return nil, fmt.Errorf("--event-qps: %v: want a positive number", o.eventQPS)
	}
	if o.eventBurst <= 0 {
		return nil, fmt.Errorf("--event-burst: %d: want a positive number", o.eventBurst)
	}
	if o.nodeStatusUpdate <= 0 {
		return nil, fmt.Errorf("--node-status-update-frequency: %s: want a positive duration", o.nodeStatusUpdate)
	}
	reportSet, updateSet := false, false
	fs.Visit(func(f *flag.Flag) {
		reportSet = reportSet || f.Name == "node-status-report-frequency"
		updateSet = updateSet || f.Name == "node-status-update-frequency"
	})
	if updateSet && !reportSet {
		o.nodeStatusReport = o.nodeStatusUpdate // kubelet's backward-compatible default
	}
	if o.nodeStatusReport < o.nodeStatusUpdate {
		return nil, fmt.Errorf("--node-status-report-frequency: %s: want at least --node-status-update-frequency (%s)", o.nodeStatusReport, o.nodeStatusUpdate)
	}
	if o.nodeIP != "" && net.ParseIP(o.nodeIP) == nil {
		return nil, fmt.Errorf("--node-ip: %q is not an IP address", o.nodeIP)
	}
	if o.maxPods <= 0 {
		return nil, fmt.Errorf("--max-pods: %d: want a positive number", o.maxPods)
	}
	var unsafe []string
	for _, p := range strings.Split(o.unsafeSysctls, ",") {
		if p = strings.TrimSpace(p); p != "" {
			unsafe = append(unsafe, p)
		}
	}
	sc, err := podspec.NewSysctls(podspec.KernelRelease(), unsafe)
	if err != nil {
		return nil, fmt.Errorf("--allowed-unsafe-sysctls: %w", err)
	}
	o.sysctls = sc
	if o.verbosity < 0 {
		return nil, fmt.Errorf("-v: %d: want 0 or more", o.verbosity)
	}
	if o.port < 0 || o.port > 65535 {
		return nil, fmt.Errorf("--port: %d: want 0..65535", o.port)
	}
	if (o.tlsCertFile == "") != (o.tlsPrivateKeyFile == "") {
		return nil, errors.New("--tls-cert-file and --tls-private-key-file: give both or neither")
	}
	// Secure by default: a node that knows its API server asks it
	// (SubjectAccessReview) whether a caller may exec, attach or read logs;
	// AlwaysAllow only when given, or when there is no API server to ask.
	if o.authorizationMode == "" {
		o.authorizationMode = "AlwaysAllow"
		if o.kubeconfig != "" {
			o.authorizationMode = "Webhook"
		}
	}
	switch o.authorizationMode {
	case "AlwaysAllow":
	case "Webhook":
		if o.kubeconfig == "" {
			return nil, errors.New("--authorization-mode=Webhook: needs --kubeconfig (SubjectAccessReview goes to the API server); without it only AlwaysAllow is possible")
		}
	default:
		return nil, fmt.Errorf("--authorization-mode: %q: want AlwaysAllow or Webhook", o.authorizationMode)
	}
	if o.rotateServerCertificates {
		if o.kubeconfig == "" {
			return nil, errors.New("--rotate-server-certificates: needs --kubeconfig (the CertificateSigningRequest goes to the API server)")
		}
		if o.tlsCertFile != "" {
			return nil, errors.New("--rotate-server-certificates and --tls-cert-file: give one of them")
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--authentication-token-webhook-cache-ttl", o.tokenCacheTTL},
		{"--authorization-webhook-cache-authorized-ttl", o.authorizedCacheTTL},
		{"--authorization-webhook-cache-unauthorized-ttl", o.unauthorizedCacheTTL},
	} {
		if d.v < 0 {
			return nil, fmt.Errorf("%s: %s: want 0 (no cache) or more", d.name, d.v)
		}
	}
	q, err := resource.ParseQuantity(o.containerLogMaxSize)
	if err != nil || q.Value() <= 0 {
		return nil, fmt.Errorf("--container-log-max-size: %q: want a positive quantity such as 10Mi", o.containerLogMaxSize)
	}
	o.logMaxSizeBytes = q.Value()
	if o.containerLogMaxFiles < 2 {
		return nil, fmt.Errorf("--container-log-max-files: %d: want 2 or more", o.containerLogMaxFiles)
	}
	if err := o.checkDevicePluginsDir(fs); err != nil {
		return nil, err
	}
	if err := o.checkLogDirs(fs); err != nil {
		return nil, err
	}
	if o.readOnlyPort < 0 || o.readOnlyPort > 65535 {
		return nil, fmt.Errorf("--read-only-port: %d: want 0..65535", o.readOnlyPort)
	}
	if net.ParseIP(o.healthzBindAddress) == nil {
		return nil, fmt.Errorf("--healthz-bind-address: %q is not an IP address", o.healthzBindAddress)
	}
	if o.healthzPort < 0 || o.healthzPort > 65535 {
		return nil, fmt.Errorf("--healthz-port: %d: want 0..65535", o.healthzPort)
	}
	if o.manifestURL != "" {
		u, err := url.Parse(o.manifestURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--manifest-url: %q: want an http:// or https:// URL", o.manifestURL)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"--sync-frequency", o.syncFrequency}, {"--crashloop-backoff-base", o.crashLoopBackOffBase},
		{"--image-pull-backoff-base", o.imagePullBackOffBase}, {"--runtime-request-timeout", o.requestTimeout},
		{"--file-check-frequency", o.fileCheckFrequency}, {"--http-check-frequency", o.httpCheckFrequency},
		{"--runtime-wait", o.runtimeWait},
	} {
		if d.v <= 0 {
			return nil, fmt.Errorf("%s: %s: want a positive duration", d.name, d.v)
		}
	}
	switch o.logFormat {
	case "text", "json":
	default:
		return nil, fmt.Errorf("--log-format: %q: want text or json", o.logFormat)
	}
	if o.minContainerTTL < 0 {
		return nil, fmt.Errorf("--minimum-container-ttl-duration: %s: want 0 or more", o.minContainerTTL)
	}
	// Every CRI list reply must fit one gRPC message (cri.MaxMsgSize, the
	// limit of kubelet's client and of containerd's server). ListPodSandbox
	// is made whole: at most two sandboxes per pod. ListContainers and the
	// stats lists are split by sandbox when the whole reply is too large
	// (cri/split.go): one sandbox's reply holds its pod's containers, each
	// with the newest dead instance and up to
	// --maximum-dead-containers-per-container more.
	if o.maxDeadPerContainer < 0 {
		return nil, fmt.Errorf("--maximum-dead-containers-per-container: %d: want 0 or more", o.maxDeadPerContainer)
	}
	if n := int64(o.maxPods) * 2 * engine.MaxSandboxRecordBytes; n > cri.MaxMsgSize {
		return nil, fmt.Errorf("--max-pods: %d pods let ListPodSandbox return up to %d MiB (2 sandboxes of up to %d KiB each per pod), more than the %d MiB a CRI message may hold; at most %d pods",
			o.maxPods, (n+1<<20-1)>>20, engine.MaxSandboxRecordBytes>>10, cri.MaxMsgSize>>20, cri.MaxMsgSize/(2*engine.MaxSandboxRecordBytes))
	}
	if n := int64(config.MaxContainers) * int64(max(o.maxDeadPerContainer, 1)+1) * engine.MaxContainerRecordBytes; n > cri.MaxMsgSize {
		return nil, fmt.Errorf("--maximum-dead-containers-per-container: %d lets the ListContainers reply of one pod (%d containers) hold up to %d MiB, more than the %d MiB a CRI message may hold; at most %d",
			o.maxDeadPerContainer, config.MaxContainers, (n+1<<20-1)>>20, cri.MaxMsgSize>>20, cri.MaxMsgSize/(config.MaxContainers*engine.MaxContainerRecordBytes)-1)
	}
	if err := (containergc.Policy{MinAge: o.minContainerTTL, MaxPerContainer: o.maxDeadPerContainer, MaxContainers: o.maxDead}).Check(); err != nil {
		return nil, err
	}
	if err := o.imageGC().Check(); err != nil {
		return nil, err
	}
	if err := o.node.check(); err != nil {
		return nil, err
	}
	return o, nil
}

func runMain(args []string) int { return daemonMain("speclet run", args, parseRunFlags, runDaemon) }

// daemonMain parses a long-running subcommand's flags and runs it until
// SIGTERM or SIGINT: exit 0 for -h, 2 for bad flags and 1 when it fails,
// each error on stderr behind the command's name.
func daemonMain[O any](name string, args []string, parse func([]string, io.Writer) (O, error),
	run func(context.Context, O, io.Writer) error) int {
	o, err := parse(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	return 0
}

// logLevel maps -v to a slog level: 0-1 info, 2-3 engine.LevelVerbose,
// 4-5 debug, 6 and more debug-4.
func logLevel(v int) slog.Level {
	switch {
	case v >= 6:
		return slog.LevelDebug - 4
	case v >= 4:
		return slog.LevelDebug
	case v >= 2:
		return engine.LevelVerbose
	}
	return slog.LevelInfo
}

func newLogger(o *runOptions, w io.Writer) *slog.Logger {
	level := logLevel(o.verbosity)
	ho := &slog.HandlerOptions{Level: level}
	if o.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}

// readOnlyAddr is the address the read-only server listens on and the
// flag that chose it: --read-only-address when given; else 127.0.0.1 for
// a node of a cluster (--kubeconfig: its --address is the one the API
// server and everyone on the network reach, and kubelet's configuration
// file turns the read-only port off by default), --address for a
// standalone node.
func (o *runOptions) readOnlyAddr() (host, flag string) {
	switch {
	case o.readOnlyAddress != "":
		return o.readOnlyAddress, "--read-only-address"
	case o.kubeconfig != "":
		return "127.0.0.1", "--read-only-address (default 127.0.0.1 with --kubeconfig)"
	}
	return o.address, "--address"
}

// runDaemon runs the node agent until ctx ends. It returns nil after a
// clean stop; pods keep running, to be adopted by the next start.
func runDaemon(ctx context.Context, o *runOptions, logw io.Writer) error {
	log := newLogger(o, logw)
	slog.SetDefault(log)
	log.Info("speclet starting", "version", specletVersion())
	if err := os.MkdirAll(o.rootDir, 0o755); err != nil {
		hint := ""
		if errors.Is(err, os.ErrPermission) && os.Geteuid() != 0 {
			hint = " (run as root, or give a --root-dir you can write)"
		}
		return fmt.Errorf("create --root-dir: %w%s", err, hint)
	}
	unlock, err := lockRootDir(o.rootDir)
	if err != nil {
		return err
	}
	defer unlock()

	endpoint := o.endpoint
	if o.runtime == "sim" {
		srv, err := sim.Start(filepath.Join(o.rootDir, "sim"), sim.Options{})
		if err != nil {
			return fmt.Errorf("start simulated runtime under %s: %w", o.rootDir, err)
		}
		defer srv.Stop()
		endpoint = srv.Endpoint
		log.Info("simulated runtime started", "endpoint", endpoint)
	}
	// Every caller of the runtime (the engine, the kubelet API, log
	// rotation, the Node keeper) gets this one client: metered on reg and,
	// with --cri-audit-log, recorded by the CRI audit (both are gRPC
	// interceptors on the client's calls).
	reg := prometheus.NewRegistry()
	probeReg := prometheus.NewRegistry() // /metrics/probes, as kubelet keeps them off /metrics
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	dialOpts := []cri.Option{cri.WithTimeout(o.requestTimeout), cri.WithMetrics(reg)}
	if o.criAuditLog != "" {
		f, err := os.OpenFile(o.criAuditLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("open --cri-audit-log: %w", err)
		}
		defer f.Close()
		rec := criaudit.NewLogRecorder(f)
		defer func() {
			if err := rec.Err(); err != nil {
				log.Error("CRI audit log incomplete", "file", o.criAuditLog, "err", err)
			}
		}()
		dialOpts = append(dialOpts, rec.DialOption())
		log.Info("recording CRI calls", "file", o.criAuditLog)
	}
	client, err := cri.Dial(ctx, endpoint, dialOpts...)
	if err != nil {
		return fmt.Errorf("connect to runtime (--container-runtime-endpoint): %w", err)
	}
	defer client.Close()
	rt := client
	if err := waitRuntime(ctx, rt, o.runtimeWait, log); err != nil {
		if ctx.Err() != nil {
			log.Info("stopped while waiting for the runtime")
			return nil
		}
		hint := ""
		if o.runtime == "remote" && os.Geteuid() != 0 {
			hint = " (not root: the runtime's socket is usually root's; try --runtime=sim)"
		}
		return fmt.Errorf("runtime at %s (--container-runtime-endpoint) does not answer: %w%s", endpoint, err, hint)
	}

	var api *apiClient
	if o.kubeconfig != "" {
		if api, err = newAPIClient(o); err != nil {
			return err
		}
		// client-go's reflectors (the pod source, the service and
		// runtime class informers) retry on their own: their failures go
		// to speclet's log, each cause once, not one klog line per retry.
		utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{apierr.ClientErrors(log)}
	}
	nd, err := setupNode(o.node, o.runtime == "sim", log)
	if err != nil {
		return err
	}
	if nd.devices, err = startDevices(o, log); err != nil {
		return err
	}
	defer nd.devices.Stop()
	eng, err := newEngine(ctx, o, agent{rt: rt, api: api, nd: nd, reg: reg, probeReg: probeReg, log: log})
	if err != nil {
		return err
	}
	// the device plugin machines' steps in the engine's metrics
	nd.devices.Observe(eng.Sinks())

	// the device plugins' devices (engine/devicemanager); none without its manager
	prSrv, err := startPodResources(o, eng, nd.podResourcesDevices(), reg, log)
	if err != nil {
		return err
	}
	defer prSrv.Stop(5 * time.Second)

	// the two ports' stats pages share their housekeeping passes, as
	// kubelet's share cAdvisor's cache
	statsCache := kubeletapi.NewStatsCache(0)
	var httpSrv *server.Server
	if o.readOnlyPort == 0 {
		log.Info("read-only server off (--read-only-port 0)")
	} else {
		host, flag := o.readOnlyAddr()
		addr := net.JoinHostPort(host, strconv.Itoa(o.readOnlyPort))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s (%s, --read-only-port): %w", addr, flag, err)
		}
		stats, err := readOnlyStats(o, eng, rt, probeReg, statsCache, log)
		if err != nil {
			return err
		}
		httpSrv = server.New(l, readOnlyMux(o, eng, reg, stats), server.DefaultLimits)
		go func() {
			if err := httpSrv.Serve(); err != nil {
				log.Error("read-only server stopped", "addr", addr, "err", err)
			}
		}()
		log.Info("read-only server listening", "addr", "http://"+addr, "paths", "/pods /healthz /metrics /stats/summary /metrics/cadvisor /metrics/resource /metrics/probes /debug/pods /spec/graph", "profiling", o.enableProfiling)
	}

	var apiSrv *server.Server
	if o.port == 0 {
		log.Info("kubelet API off (--port 0)")
	} else {
		apiSrv, err = startKubeletAPI(ctx, o, eng, rt, endpoint, reg, probeReg, statsCache, log)
		if err != nil {
			return err
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	merger := config.NewMerger(log)
	var wg sync.WaitGroup
	if o.healthzPort == 0 {
		log.Info("healthz server off (--healthz-port 0)")
	} else {
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveHealthz(runCtx, o, eng, log)
		}()
	}
	if o.manifestPath != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := config.DirSource{Dir: o.manifestPath, NodeName: o.nodeName, Period: o.fileCheckFrequency}
			if err := config.WatchDir(runCtx, src, merger, log); err != nil && runCtx.Err() == nil {
				log.Error("manifest directory source stopped", "dir", o.manifestPath, "err", err)
			}
		}()
	}
	if o.manifestURL != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := config.URLSource{URL: o.manifestURL, NodeName: o.nodeName, Period: o.httpCheckFrequency}
			if err := config.WatchURL(runCtx, src, merger, log); err != nil && runCtx.Err() == nil {
				log.Error("manifest URL source stopped", "url", o.manifestURL, "err", err)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rot := &containerlogs.Rotator{Runtime: rt, MaxSize: o.logMaxSizeBytes, MaxFiles: o.containerLogMaxFiles, Log: log,
			LinkOf: engine.LogLinkOf(o.containerLogLinksDir), LinksDir: o.containerLogLinksDir}
		rot.Run(runCtx, containerlogs.DefaultPeriod)
	}()
	if api != nil {
		api.start(runCtx, o, nd, eng, rt, merger, log)
	}
	startOOMWatch(runCtx, &wg, api, log)
	if o.manifestPath == "" && o.manifestURL == "" && api == nil {
		log.Warn("no pod source: give --pod-manifest-path, --manifest-url or --kubeconfig")
	}
	log.Info("speclet running", "node", o.nodeName, "runtime", endpoint, "root-dir", o.rootDir,
		"pod-manifest-path", o.manifestPath, "manifest-url", o.manifestURL)

	runErr := eng.Run(runCtx, merger.Updates())
	cancel()
	wg.Wait()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	if httpSrv != nil {
		httpSrv.Shutdown(sctx)
	}
	if apiSrv != nil {
		apiSrv.Shutdown(sctx)
	}
	scancel()
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return fmt.Errorf("engine: %w", runErr)
	}
	if o.runtime == "sim" {
		log.Info("speclet stopped; the simulated runtime stops with it and its pods are gone (a next start begins with none)")
	} else {
		log.Info("speclet stopped; pods keep running and are adopted at the next start")
	}
	return nil
}

// lockRootDir takes an exclusive flock on <root>/speclet.lock, so that one
// instance runs per root dir; a second one fails here before it touches
// anything else (the simulated runtime's socket, pod directories). The lock
// goes with the process, even after kill -9.
func lockRootDir(root string) (unlock func(), err error) {
	path := filepath.Join(root, "speclet.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock --root-dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := io.ReadAll(io.LimitReader(f, 64))
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who != "" {
				who = " (pid " + who + ")"
			}
			return nil, fmt.Errorf("--root-dir %s is in use by another speclet%s: it holds %s; give each instance its own --root-dir", root, who, path)
		}
		return nil, fmt.Errorf("lock --root-dir: flock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}

// waitRuntime waits until the runtime answers Version, for at most timeout.
// It asks every second; when the time is up it returns the runtime's last
// error.
func waitRuntime(ctx context.Context, rt cri.Runtime, timeout time.Duration, log *slog.Logger) error {
	var last error
	// each attempt has 5 s from ctx, also the first with --runtime-wait=0
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		v, err := rt.Version(cctx)
		if err == nil {
			log.Info("runtime answers", "name", v.GetRuntimeName(), "version", v.GetRuntimeVersion(), "cri", v.GetRuntimeApiVersion())
			return true, nil
		}
		if last == nil {
			log.Warn("runtime does not answer yet; waiting", "for", timeout, "err", err)
		}
		last = err
		return false, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}
