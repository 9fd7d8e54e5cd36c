package kubeletapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/engine/cgroupstats"
	"github.com/speclet/speclet/engine/containerlogs"
	"github.com/speclet/speclet/fsm"
)

// Host is the node whose pods the API serves.
type Host interface {
	// Pods returns the pods the node runs, with their status.
	Pods() []*v1.Pod
	// Healthz returns nil when the node is healthy, or why it is not.
	Healthz() error
}

// Runtime is the part of the CRI the API uses: reads and the streaming calls.
// None of them is a lifecycle effect: they are not spec actions, but each
// route's handler in spec/callers.hcl (caller kubelet_api) declares the
// calls it makes, and the route runs under its tag (Exec, Attach and
// PortForward only prepare a session of the user's; ExecSync is /run, the
// user's command). Give it the runtime the engine gets (cmd/speclet), so
// that the CRI audit and the runtime metrics see its calls too.
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, containerID string) (*runtimeapi.ContainerStatus, error)
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (cri.ExecResult, error)
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
	cri.Streaming
	cri.Stats
}

// Labels names the CRI labels that tie a runtime object to its pod.
type Labels struct {
	PodUID, PodName, PodNamespace, ContainerName string
}

// Config configures the API.
type Config struct {
	Host    Host
	Runtime Runtime
	Labels  Labels
	// Fallback, when set, are another agent's labels (kubelet's
	// io.kubernetes.*), read on an object without Labels.PodUID: a
	// container of a pod that agent started is found by them (logs, exec,
	// attach, port-forward, /run, stats).
	Fallback Labels
	NodeName string
	// RootDir is the directory whose file system /stats/summary reports
	// as the node's, and whose pods/<uid>/volumes are the pods' volumes;
	// "" leaves them out.
	RootDir string
	// PodLogsDir holds the pods' log directories
	// (<ns>_<name>_<uid>/<container>), each container's logs in the
	// summary; "" leaves them out.
	PodLogsDir string
	// ClientCAs verifies client certificates (--client-ca-file); nil: no
	// certificate is accepted.
	ClientCAs *x509.CertPool
	// Tokens checks bearer tokens (TokenReview); nil: bearer tokens get 401.
	Tokens TokenReviewer
	// Anonymous lets requests without credentials in as system:anonymous
	// (--anonymous-auth); they are authorized like any other.
	Anonymous  bool
	Authorizer Authorizer
	Gatherer   prometheus.Gatherer // /metrics; nil: no /metrics
	// Probes is /metrics/probes (prober_probe_total,
	// prober_probe_duration_seconds); nil: no /metrics/probes.
	Probes prometheus.Gatherer
	// Cgroups is where /metrics/cadvisor and /stats/summary read the
	// pods' cgroups; nil: the host's under /sys/fs/cgroup (none when it
	// has no cgroup filesystem: no cgroup series then).
	Cgroups *cgroupstats.Dirs
	// SystemCgroups are the system containers' cgroups by their Summary
	// API names (statsapi.SystemContainerKubelet, SystemContainerRuntime,
	// SystemContainerMisc: kubelet's --kubelet-cgroups, --runtime-cgroups,
	// --system-cgroups). Without a kubelet entry the node agent's own
	// cgroup is reported when it is not the root; "pods" is always the
	// kubepods cgroup.
	SystemCgroups map[string]string
	// Configz is the node's configuration as kubelet's /configz shows it,
	// served as {"kubeletconfig": Configz} in JSON (a
	// kubelet.config.k8s.io/v1beta1 KubeletConfiguration); nil: no /configz.
	Configz any
	// Stats is the cache of housekeeping passes /stats/summary,
	// /metrics/resource and /metrics/cadvisor are served from; give the
	// authenticated and the read-only API the same. nil: the API's own,
	// of DefaultStatsMaxAge.
	Stats *StatsCache
	Log   *slog.Logger
	Now   func() time.Time
}

// API is the kubelet API of port 10250.
type API struct {
	c      Config
	mux    *http.ServeMux
	dirs   *cgroupstats.Dirs
	finder *cgroupstats.Finder
	stats  *StatsCache
}

// New returns the API; serve it with TLSConfig through ServeTLS.
func New(c Config) (*API, error) {
	if c.Host == nil || c.Runtime == nil || c.Authorizer == nil || c.NodeName == "" {
		return nil, errors.New("kubelet API: Host, Runtime, Authorizer and NodeName are required")
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Stats == nil {
		c.Stats = NewStatsCache(0)
	}
	a := &API{c: c, mux: http.NewServeMux(), dirs: cadvisorDirs(c.Cgroups), stats: c.Stats}
	if a.dirs != nil {
		a.finder = &cgroupstats.Finder{Dirs: *a.dirs}
	}
	a.routes()
	return a, nil
}

// TLSConfig returns the server side TLS configuration with cert as the
// serving certificate. Client certificates are asked for, not required, and
// verified per request (as kubelet's x509 authenticator does), so that a
// certificate the client CA did not sign gets 401 rather than a failed
// handshake.
func (a *API) TLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}
}

// TLSConfigFunc is TLSConfig with the serving certificate from get at each
// handshake (a certificate that is renewed while the server runs).
func (a *API) TLSConfigFunc(get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) *tls.Config {
	return &tls.Config{GetCertificate: get, MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}
}

// ServeHTTP authenticates, authorizes, then routes.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, err := a.authenticate(r)
	if err != nil {
		if !errors.Is(err, errUnauthorized) {
			a.c.Log.Warn("kubelet API: authentication failed", "path", r.URL.Path, "err", err)
		}
		// A caller without credentials keeps no connection: a flood of
		// them costs a handshake and one request each.
		w.Header().Set("Connection", "close")
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	at := Attributes{User: u, Verb: verbOf(r.Method), Node: a.c.NodeName, Path: r.URL.Path}
	subs := subresourcesOf(r.URL.Path)
	var reason string
	allowed := false
	for _, s := range subs {
		at.Subresource = s
		ok, why, err := a.c.Authorizer.Authorize(r.Context(), at)
		if err != nil {
			a.c.Log.Warn("kubelet API: authorization failed", "user", u.Name, "path", r.URL.Path, "err", err)
			http.Error(w, "Authorization error (user="+u.Name+", verb="+at.Verb+", resource=nodes, subresource="+s+")", http.StatusInternalServerError)
			return
		}
		if ok {
			allowed = true
			break
		}
		if reason == "" {
			reason = why
		}
	}
	if !allowed {
		msg := fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Name, at.Verb, subs)
		if reason != "" {
			msg += ": " + reason
		}
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	a.mux.ServeHTTP(w, r)
}

// authenticate returns the request's user: a verified client certificate,
// else a bearer token the reviewer accepts, else the anonymous user when
// allowed; otherwise errUnauthorized.
func (a *API) authenticate(r *http.Request) (User, error) {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		if a.c.ClientCAs == nil {
			return User{}, errUnauthorized
		}
		leaf := r.TLS.PeerCertificates[0]
		inter := x509.NewCertPool()
		for _, c := range r.TLS.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: a.c.ClientCAs, Intermediates: inter,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: a.c.Now()}); err != nil {
			a.c.Log.Info("kubelet API: client certificate refused", "subject", leaf.Subject.String(), "err", err)
			return User{}, errUnauthorized
		}
		return userFromCert(leaf), nil
	}
	if tok, ok := bearerToken(r); ok {
		if a.c.Tokens == nil {
			return User{}, errUnauthorized
		}
		u, ok, err := a.c.Tokens.ReviewToken(r.Context(), tok)
		if err != nil {
			return User{}, err
		}
		if !ok {
			return User{}, errUnauthorized
		}
		return u, nil
	}
	if a.c.Anonymous {
		return Anonymous, nil
	}
	return User{}, errUnauthorized
}

func (a *API) routes() {
	m := a.mux
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := a.c.Host.Healthz(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	})
	if a.c.Gatherer != nil {
		m.Handle("GET /metrics", promhttp.HandlerFor(a.c.Gatherer, promhttp.HandlerOpts{}))
	}
	m.HandleFunc("GET /pods", a.pods)
	if a.c.Configz != nil {
		m.HandleFunc("GET /configz", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, map[string]any{"kubeletconfig": a.c.Configz})
		})
	}
	// The routes that call the runtime run under their handler's tag.
	a.statsRoutes(m)
	m.HandleFunc("GET /runningpods/", tagged(fsm.HandlerKubeletApiRunningPods, a.runningPods))
	m.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", tagged(fsm.HandlerKubeletApiContainerLogs, a.containerLogs))
	for _, p := range []string{"/exec/{ns}/{pod}/{container}", "/exec/{ns}/{pod}/{uid}/{container}"} {
		m.HandleFunc("GET "+p, tagged(fsm.HandlerKubeletApiExec, a.exec))
		m.HandleFunc("POST "+p, tagged(fsm.HandlerKubeletApiExec, a.exec))
	}
	for _, p := range []string{"/attach/{ns}/{pod}/{container}", "/attach/{ns}/{pod}/{uid}/{container}"} {
		m.HandleFunc("GET "+p, tagged(fsm.HandlerKubeletApiAttach, a.attach))
		m.HandleFunc("POST "+p, tagged(fsm.HandlerKubeletApiAttach, a.attach))
	}
	for _, p := range []string{"/portForward/{ns}/{pod}", "/portForward/{ns}/{pod}/{uid}"} {
		m.HandleFunc("GET "+p, tagged(fsm.HandlerKubeletApiPortForward, a.portForward))
		m.HandleFunc("POST "+p, tagged(fsm.HandlerKubeletApiPortForward, a.portForward))
	}
	m.HandleFunc("POST /run/{ns}/{pod}/{container}", tagged(fsm.HandlerKubeletApiRun, a.run))
	m.HandleFunc("POST /run/{ns}/{pod}/{uid}/{container}", tagged(fsm.HandlerKubeletApiRun, a.run))
}

// tagged runs h with its request's context tagged with handler, the
// route's declaration in spec/callers.hcl, so that the CRI audit checks the
// calls h makes against the handler's cri list.
func tagged(handler fsm.Handler, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h(w, r.WithContext(handler.Tag(r.Context())))
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// findPod returns the node's pod ns/name (and uid, when given), or writes
// 404.
func (a *API) findPod(w http.ResponseWriter, r *http.Request) (*v1.Pod, bool) {
	ns, name, uid := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("uid")
	for _, p := range a.c.Host.Pods() {
		if p.Namespace == ns && p.Name == name && (uid == "" || string(p.UID) == uid) {
			return p, true
		}
	}
	httpError(w, http.StatusNotFound, "pod %q not found on node %s", ns+"/"+name, a.c.NodeName)
	return nil, false
}

func hasContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true // kubectl debug: logs, exec and attach reach it too
		}
	}
	return false
}

// containerLogs serves /containerLogs/{ns}/{pod}/{container}: the current
// container's log, or with previous=true the one before it.
func (a *API) containerLogs(w http.ResponseWriter, r *http.Request) {
	o, err := parseLogOptions(r.URL.Query(), a.c.Now())
	if err != nil {
		httpError(w, http.StatusBadRequest, "containerLogs: %v", err)
		return
	}
	pod, ok := a.findPod(w, r)
	if !ok {
		return
	}
	name := r.PathValue("container")
	if !hasContainer(pod, name) {
		httpError(w, http.StatusNotFound, "container %q not found in pod %s/%s", name, pod.Namespace, pod.Name)
		return
	}
	cs, err := a.containerIDs(r.Context(), string(pod.UID), name)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "list containers of %s/%s: %v", pod.Namespace, pod.Name, err)
		return
	}
	i := 0
	if o.Previous {
		i = 1
	}
	if len(cs) <= i {
		what := "no container"
		if o.Previous {
			what = "no previous container"
		}
		httpError(w, http.StatusBadRequest, "%s %q in pod %s/%s (%d in the runtime)", what, name, pod.Namespace, pod.Name, len(cs))
		return
	}
	id := cs[i].Id
	st, err := a.c.Runtime.ContainerStatus(r.Context(), id)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "container status of %q: %v", name, err)
		return
	}
	if st.LogPath == "" {
		httpError(w, http.StatusNotFound, "container %q of %s/%s has no log file", name, pod.Namespace, pod.Name)
		return
	}
	liftDeadlines(w)
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Transfer-Encoding", "chunked")
	fl, _ := w.(http.Flusher)
	flush := func() {
		if fl != nil {
			fl.Flush()
		}
	}
	running := func(ctx context.Context) bool {
		s, err := a.c.Runtime.ContainerStatus(ctx, id)
		return err == nil && s.State == runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	// Every write is flushed, as kubelet's flushwriter does: a reader
	// through the API server's websocket stream sees each line at once.
	if err := containerlogs.Stream(r.Context(), st.LogPath, o, flushWriter{w, flush}, flush, running); err != nil {
		a.c.Log.Warn("kubelet API: container log", "pod", pod.Namespace+"/"+pod.Name, "container", name, "err", err)
	}
}
