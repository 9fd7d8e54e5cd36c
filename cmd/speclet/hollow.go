package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"

	"github.com/speclet/speclet/cri"
	"github.com/speclet/speclet/cri/sim"
	"github.com/speclet/speclet/engine/config"
	"github.com/speclet/speclet/engine/eviction"
)

func init() {
	register("hollow", "run N simulated nodes hollow-0..N-1 in one process, each a full engine over its own simulated runtime", hollowMain)
}

// HollowNodeName is the name of hollow node i.
func hollowNodeName(i int) string { return "hollow-" + strconv.Itoa(i) }

// hollowOptions are the flags of `speclet hollow`.
type hollowOptions struct {
	kubeconfig string
	tokenFile  string
	nodes      int
	podsMax    int
	rootDir    string
	verbosity  int
	logFormat  string
	// runArgs are `speclet run` flags (after --) every node gets.
	runArgs []string
}

// hollowForced are the `speclet run` flags hollow sets per node.
var hollowForced = []string{"runtime", "node-name", "hostname-override", "root-dir", "kubeconfig", "port", "read-only-port",
	"max-pods", "pod-manifest-path", "manifest-url", "rotate-server-certificates", "authorization-mode", "cri-audit-log"}

func parseHollowFlags(args []string, stderr io.Writer) (*hollowOptions, error) {
	o := &hollowOptions{}
	fs := flag.NewFlagSet("speclet hollow", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig naming the API server and its CA; its own credentials are not used: each node authenticates with its token from --node-token-file")
	fs.StringVar(&o.tokenFile, "node-token-file", "", "the API server's static token file (--token-auth-file CSV: token,user,uid[,\"groups\"]): node hollow-<i> uses the token of user system:node:hollow-<i>, which must be in group system:nodes")
	fs.IntVar(&o.nodes, "nodes", 1, "how many hollow nodes: hollow-0 .. hollow-<N-1>")
	fs.IntVar(&o.podsMax, "pods-per-node-max", 110, "each node's pods capacity (--max-pods of speclet run)")
	fs.StringVar(&o.rootDir, "root-dir", "/tmp/speclet-hollow", "directory holding one root dir per node (<root-dir>/hollow-<i>) and its simulated runtime's socket")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity, as speclet run's -v (every line names its node)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.runArgs = fs.Args()
	switch {
	case o.kubeconfig == "":
		return nil, errors.New("--kubeconfig: required (hollow nodes join an API server)")
	case o.tokenFile == "":
		return nil, errors.New("--node-token-file: required (each hollow node authenticates as system:node:hollow-<i>)")
	case o.nodes < 1:
		return nil, fmt.Errorf("--nodes: %d: want 1 or more", o.nodes)
	case o.podsMax < 1:
		return nil, fmt.Errorf("--pods-per-node-max: %d: want 1 or more", o.podsMax)
	case o.rootDir == "":
		return nil, errors.New("--root-dir: empty")
	}
	for _, a := range o.runArgs {
		name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
		for _, f := range hollowForced {
			if strings.HasPrefix(a, "-") && name == f {
				return nil, fmt.Errorf("%s: set by speclet hollow for each node; it cannot be given after --", a)
			}
		}
	}
	return o, nil
}

// nodeRunOptions are the `speclet run` options of hollow node i: the
// run flags after -- and what hollow sets. Parsed by parseRunFlags, so a
// hollow node has speclet run's defaults and checks.
func (o *hollowOptions) nodeRunOptions(i int) (*runOptions, error) {
	// --node-ip defaults to loopback: hollow nodes share this machine.
	args := append([]string{"--node-ip", "127.0.0.1"}, o.runArgs...)
	args = append(args, "--runtime", "sim", "--node-name", hollowNodeName(i),
		"--root-dir", filepath.Join(o.rootDir, hollowNodeName(i)), "--kubeconfig", o.kubeconfig,
		"--port", "0", "--read-only-port", "0", "--max-pods", strconv.Itoa(o.podsMax),
		"--cgroups-per-qos=false", "--enforce-node-allocatable=none",
		"-v", strconv.Itoa(o.verbosity), "--log-format", o.logFormat)
	ro, err := parseRunFlags(args, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", hollowNodeName(i), err)
	}
	return ro, nil
}

func hollowMain(args []string) int {
	return daemonMain("speclet hollow", args, parseHollowFlags, runHollow)
}

// readNodeTokens reads a static token file (kube-apiserver's
// --token-auth-file: token,user,uid[,"group,group"]) and returns the token
// of each system:node:<name> user in group system:nodes, by node name.
func readNodeTokens(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--node-token-file: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	r.Comment = '#'
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("--node-token-file %s: %w", path, err)
	}
	out := map[string]string{}
	for i, rec := range recs {
		if len(rec) < 3 {
			return nil, fmt.Errorf("--node-token-file %s: line %d: want token,user,uid[,groups]", path, i+1)
		}
		name, ok := strings.CutPrefix(rec[1], "system:node:")
		if !ok {
			continue
		}
		inNodes := len(rec) > 3 && strings.Contains(","+rec[3]+",", ",system:nodes,")
		if !inNodes {
			return nil, fmt.Errorf("--node-token-file %s: line %d: user %s is not in group system:nodes (the Node authorizer would refuse it)", path, i+1, rec[1])
		}
		out[name] = rec[0]
	}
	return out, nil
}

// hollowAPI is the one connection pool every node shares: the API server
// and CA of --kubeconfig, its credentials dropped; each node's requests
// carry its own bearer token over it.
type hollowAPI struct {
	base *rest.Config
	rt   http.RoundTripper
}

func newHollowAPI(kubeconfig string) (*hollowAPI, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	base := rest.AnonymousClientConfig(cfg)
	rt, err := rest.TransportFor(base)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: transport: %w", err)
	}
	return &hollowAPI{base: base, rt: rt}, nil
}

// client is node o's clientset: its token, its rate limit (--kube-api-qps,
// --kube-api-burst), the shared transport.
func (h *hollowAPI) client(o *runOptions, token string, qps float64, burst int) (*kubernetes.Clientset, error) {
	cfg := rest.CopyConfig(h.base)
	cfg.QPS, cfg.Burst = float32(qps), burst
	cfg.UserAgent = "speclet-hollow/" + specletVersion()
	// Protobuf, as kubelet (and kubemark's hollow kubelet) talk: the
	// encoding of requests, not what they ask.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	hc := &http.Client{Transport: transport.NewBearerAuthRoundTripper(token, h.rt)}
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("node %s: client: %w", o.nodeName, err)
	}
	return cs, nil
}

// hostSignals measures the host's eviction signals once per second for
// every node (they share the machine and the filesystem of --root-dir):
// what each node's eviction manager would read itself, without N reads of
// /proc per pass. The simulated image filesystem is --root-dir's, as in
// speclet run --runtime=sim.
type hostSignals struct {
	root string
	nd   *nodeResources
	mu   sync.Mutex
	at   time.Time
	obs  eviction.Observations
	err  error
}

func (h *hostSignals) measure(ctx context.Context, imageFs string) (eviction.Observations, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.at) >= time.Second {
		h.obs, h.err = h.nd.signals(h.root, func(string) string { return h.root })(ctx, h.root)
		h.at = time.Now()
	}
	return maps.Clone(h.obs), h.err
}

// hollowNode is one running hollow node.
type hollowNode struct {
	name   string
	srv    *sim.Server
	client *cri.Client
	done   chan error
}

func runHollow(ctx context.Context, o *hollowOptions, logw io.Writer) error {
	log := newLogger(&runOptions{verbosity: o.verbosity, logFormat: o.logFormat}, logw)
	slog.SetDefault(log)
	if err := os.MkdirAll(o.rootDir, 0o755); err != nil {
		return fmt.Errorf("create --root-dir: %w", err)
	}
	unlock, err := lockRootDir(o.rootDir)
	if err != nil {
		return err
	}
	defer unlock()
	tokens, err := readNodeTokens(o.tokenFile)
	if err != nil {
		return err
	}
	for i := 0; i < o.nodes; i++ {
		if tokens[hollowNodeName(i)] == "" {
			return fmt.Errorf("--node-token-file %s: no token for system:node:%s (it has %d node tokens; --nodes is %d)", o.tokenFile, hollowNodeName(i), len(tokens), o.nodes)
		}
	}
	api, err := newHollowAPI(o.kubeconfig)
	if err != nil {
		return err
	}
	first, err := o.nodeRunOptions(0)
	if err != nil {
		return err
	}
	// Every node is a sim node on this machine: one capacity for all.
	nd, err := setupNode(first.node, true, log)
	if err != nil {
		return err
	}
	signals := &hostSignals{root: o.rootDir, nd: nd}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var nodes []*hollowNode
	defer func() {
		cancel()
		for _, n := range nodes {
			if err := <-n.done; err != nil && !errors.Is(err, context.Canceled) {
				log.Error("hollow node engine stopped", "node", n.name, "err", err)
			}
			n.client.Close()
			n.srv.Stop()
		}
	}()
	for i := 0; i < o.nodes; i++ {
		ro, err := o.nodeRunOptions(i)
		if err != nil {
			return err
		}
		n, err := startHollowNode(runCtx, ro, api, tokens[ro.nodeName], nd, signals.measure, log.With("node", ro.nodeName))
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	log.Info("hollow nodes running", "nodes", o.nodes, "names", fmt.Sprintf("%s..%s", hollowNodeName(0), hollowNodeName(o.nodes-1)),
		"root-dir", o.rootDir, "kubeconfig", o.kubeconfig)
	<-ctx.Done()
	log.Info("stopping hollow nodes; their simulated runtimes stop with them")
	return nil
}

// startHollowNode starts node o: its simulated runtime on
// <root-dir>/sim/sim.sock, the engine newEngine makes (as speclet run's),
// the API pod source, Node keeper and status manager (apiClient.start).
// It runs until ctx ends; done gets the engine's result.
func startHollowNode(ctx context.Context, o *runOptions, h *hollowAPI, token string, nd *nodeResources,
	signals func(context.Context, string) (eviction.Observations, error), log *slog.Logger) (*hollowNode, error) {
	if err := os.MkdirAll(o.rootDir, 0o755); err != nil {
		return nil, fmt.Errorf("node %s: create root dir: %w", o.nodeName, err)
	}
	srv, err := sim.Start(filepath.Join(o.rootDir, "sim"), sim.Options{})
	if err != nil {
		return nil, fmt.Errorf("node %s: start simulated runtime: %w", o.nodeName, err)
	}
	client, err := cri.Dial(ctx, srv.Endpoint, cri.WithTimeout(o.requestTimeout))
	if err != nil {
		srv.Stop()
		return nil, fmt.Errorf("node %s: connect to simulated runtime: %w", o.nodeName, err)
	}
	n := &hollowNode{name: o.nodeName, srv: srv, client: client, done: make(chan error, 1)}
	fail := func(err error) (*hollowNode, error) { client.Close(); srv.Stop(); return nil, err }
	// Two clients over the one transport, as speclet run's: the node's
	// requests at --kube-api-qps, its events at --event-qps.
	cs, err := h.client(o, token, o.kubeAPIQPS, o.kubeAPIBurst)
	if err != nil {
		return fail(err)
	}
	evcs, err := h.client(o, token, o.eventQPS, o.eventBurst)
	if err != nil {
		return fail(err)
	}
	api := &apiClient{cs: cs, evcs: evcs}
	eng, err := newEngine(ctx, o, agent{rt: client, api: api, nd: nd, signals: signals, log: log})
	if err != nil {
		return fail(fmt.Errorf("node %s: %w", o.nodeName, err))
	}
	merger := config.NewMerger(log)
	api.start(ctx, o, nd, eng, client, merger, log)
	go func() { n.done <- eng.Run(ctx, merger.Updates()) }()
	return n, nil
}
