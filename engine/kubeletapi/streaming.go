// The streaming endpoints: exec, attach, port-forward and /run.

package kubeletapi

import (
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// streamOpts reads the stream flags of exec and attach as kubelet does:
// stdin/input, stdout/output, stderr/error, tty; a tty has no stderr.
func streamOpts(q url.Values) (stdin, stdout, stderr, tty bool) {
	get := func(a, b string) bool {
		return q.Get(a) == "1" || q.Get(b) == "1" || q.Get(a) == "true" || q.Get(b) == "true"
	}
	stdin, stdout, stderr, tty = get("stdin", "input"), get("stdout", "output"), get("stderr", "error"), get("tty", "tty")
	if tty {
		stderr = false
	}
	return
}

// streamTarget reads the stream flags of an exec or attach request (verb)
// and finds its running container, or writes the error: a request must ask
// for one stream at least.
func (a *API) streamTarget(w http.ResponseWriter, r *http.Request, verb string) (id string, stdin, stdout, stderr, tty, ok bool) {
	stdin, stdout, stderr, tty = streamOpts(r.URL.Query())
	if !stdin && !stdout && !stderr {
		httpError(w, http.StatusBadRequest, "%s: you must specify at least one of stdin, stdout, stderr", verb)
		return "", false, false, false, false, false
	}
	id, ok = a.runningContainer(w, r)
	return id, stdin, stdout, stderr, tty, ok
}

// runningContainer returns the ID of the running container {container} of
// the request's pod, or writes the error.
func (a *API) runningContainer(w http.ResponseWriter, r *http.Request) (string, bool) {
	pod, ok := a.findPod(w, r)
	if !ok {
		return "", false
	}
	name := r.PathValue("container")
	if !hasContainer(pod, name) {
		httpError(w, http.StatusNotFound, "container %q not found in pod %s/%s", name, pod.Namespace, pod.Name)
		return "", false
	}
	cs, err := a.containerIDs(r.Context(), string(pod.UID), name)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "list containers of %s/%s: %v", pod.Namespace, pod.Name, err)
		return "", false
	}
	if len(cs) == 0 || cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		httpError(w, http.StatusBadRequest, "container %q of pod %s/%s is not running", name, pod.Namespace, pod.Name)
		return "", false
	}
	return cs[0].Id, true
}

func (a *API) exec(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cmd := q["command"]
	if len(cmd) == 0 {
		httpError(w, http.StatusBadRequest, "exec: no command (give one or more command= parameters)")
		return
	}
	id, stdin, stdout, stderr, tty, ok := a.streamTarget(w, r, "exec")
	if !ok {
		return
	}
	u, err := a.c.Runtime.Exec(r.Context(), &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd, Tty: tty, Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err != nil {
		httpError(w, http.StatusInternalServerError, "exec in %s: %v", r.PathValue("container"), err)
		return
	}
	a.proxyStream(w, r, u)
}

func (a *API) attach(w http.ResponseWriter, r *http.Request) {
	id, stdin, stdout, stderr, tty, ok := a.streamTarget(w, r, "attach")
	if !ok {
		return
	}
	u, err := a.c.Runtime.Attach(r.Context(), &runtimeapi.AttachRequest{ContainerId: id, Tty: tty, Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err != nil {
		httpError(w, http.StatusInternalServerError, "attach to %s: %v", r.PathValue("container"), err)
		return
	}
	a.proxyStream(w, r, u)
}

func (a *API) portForward(w http.ResponseWriter, r *http.Request) {
	pod, ok := a.findPod(w, r)
	if !ok {
		return
	}
	sbs, err := a.readySandboxes(r.Context(), string(pod.UID))
	if err != nil || len(sbs) == 0 {
		httpError(w, http.StatusBadRequest, "pod %s/%s has no ready sandbox (err: %v)", pod.Namespace, pod.Name, err)
		return
	}
	var ports []int32
	for _, p := range r.URL.Query()["port"] {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			httpError(w, http.StatusBadRequest, "portForward: port %q: want 1..65535", p)
			return
		}
		ports = append(ports, int32(n))
	}
	u, err := a.c.Runtime.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sbs[0].Id, Port: ports})
	if err != nil {
		httpError(w, http.StatusInternalServerError, "port-forward to %s/%s: %v", pod.Namespace, pod.Name, err)
		return
	}
	a.proxyStream(w, r, u)
}

// run serves /run: the cmd parameter run with ExecSync, its output in the
// body (kubelet's RunInContainer).
func (a *API) run(w http.ResponseWriter, r *http.Request) {
	cmd := strings.Fields(r.URL.Query().Get("cmd"))
	if len(cmd) == 0 {
		httpError(w, http.StatusBadRequest, "run: no cmd parameter")
		return
	}
	id, ok := a.runningContainer(w, r)
	if !ok {
		return
	}
	res, err := a.c.Runtime.ExecSync(r.Context(), id, cmd, 0)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "run in %s: %v", r.PathValue("container"), err)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write(append(res.Stdout, res.Stderr...))
}

// proxyStream proxies the request, with its SPDY or WebSocket upgrade, to
// the runtime's streaming URL, as kubelet v1.34 does (it no longer
// redirects).
func (a *API) proxyStream(w http.ResponseWriter, r *http.Request, raw string) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		httpError(w, http.StatusInternalServerError, "runtime returned a bad streaming URL %q", raw)
		return
	}
	liftDeadlines(w) // until the upgrade, which clears them
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = u
			pr.Out.Host = u.Host
			pr.Out.Header.Del("Authorization")
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			a.c.Log.Warn("kubelet API: streaming proxy", "url", raw, "err", err)
			http.Error(w, "streaming proxy: "+err.Error(), http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(w, r)
}

// liftDeadlines lifts the server's read and write deadlines of a streaming
// request: a log that follows, or an exec, attach or port-forward session,
// lasts as long as the caller reads it, not the server's WriteTimeout (the
// caller is authorized; the stream ends with the container or the caller).
func liftDeadlines(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
}

// flushWriter flushes after every write.
type flushWriter struct {
	w     io.Writer
	flush func()
}

func (f flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	f.flush()
	return n, err
}
