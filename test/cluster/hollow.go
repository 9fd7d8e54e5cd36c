package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/speclet/speclet/cri/harness"
)

// Hollow node identities: with Options.HollowNodes set, Start writes the
// API server's static token file (--token-auth-file) with one random
// bearer token per node hollow-<i>, user system:node:hollow-<i>, group
// system:nodes. The Node authorizer and NodeRestriction treat such a user
// as they treat a kubelet's certificate identity: it reads and writes its
// own Node, Lease and bound pods and nothing else. Tokens, unlike client
// certificates, are per request: `speclet hollow` sends every node's
// requests over one HTTP/2 connection pool.

// HollowName is the name of hollow node i (speclet hollow's).
func HollowName(i int) string { return "hollow-" + strconv.Itoa(i) }

// HollowTokenFile is the API server's static token file ("" without
// Options.HollowNodes).
func (c *Cluster) HollowTokenFile() string {
	if c.opts.HollowNodes <= 0 {
		return ""
	}
	return c.path("hollow-tokens.csv")
}

func (c *Cluster) writeHollowTokens() error {
	if c.opts.HollowNodes <= 0 {
		return nil
	}
	var b strings.Builder
	for i := 0; i < c.opts.HollowNodes; i++ {
		tok := make([]byte, 16)
		if _, err := rand.Read(tok); err != nil {
			return err
		}
		name := HollowName(i)
		fmt.Fprintf(&b, "%s,system:node:%s,%s,\"system:nodes\"\n", hex.EncodeToString(tok), name, name)
	}
	if err := os.WriteFile(c.HollowTokenFile(), []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("write hollow node tokens: %w", err)
	}
	return nil
}

func (c *Cluster) hollowArgs() []string {
	if c.opts.HollowNodes <= 0 {
		return nil
	}
	return []string{"--token-auth-file", c.HollowTokenFile()}
}

// ServerKubeconfig writes (once) and returns a kubeconfig naming the API
// server and the cluster CA with no credentials: `speclet hollow
// --kubeconfig`, whose nodes bring their own tokens.
func (c *Cluster) ServerKubeconfig() (string, error) {
	p := c.path("server.kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: speclet
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: none
  user: {}
contexts:
- name: speclet
  context:
    cluster: speclet
    user: none
current-context: speclet
`, c.URL, c.caCrt)
	return p, os.WriteFile(p, []byte(kc), 0o600)
}

// HollowOptions configure StartHollow.
type HollowOptions struct {
	// Bin is the speclet binary (BuildSpeclet).
	Bin string
	// Nodes is how many (at most Options.HollowNodes).
	Nodes int
	// PodsPerNodeMax is each node's pods capacity (0: speclet's default).
	PodsPerNodeMax int
	// Dir holds the nodes' root dirs and the log.
	Dir string
	// Args are extra `speclet run` flags for every node (after --).
	Args []string
}

// Hollow is a running `speclet hollow`.
type Hollow struct {
	LogPath string
	p       *proc
	once    sync.Once
	err     error
}

// StartHollow runs `speclet hollow` with o.Nodes nodes joined to c; it
// returns once the process runs (the nodes register on their own).
func (c *Cluster) StartHollow(ctx context.Context, o HollowOptions) (*Hollow, error) {
	if o.Nodes > c.opts.HollowNodes {
		return nil, fmt.Errorf("start hollow nodes: %d asked, the cluster issued tokens for %d (Options.HollowNodes)", o.Nodes, c.opts.HollowNodes)
	}
	kc, err := c.ServerKubeconfig()
	if err != nil {
		return nil, err
	}
	c.watch(o.Dir)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"hollow", "--kubeconfig", kc, "--node-token-file", c.HollowTokenFile(),
		"--nodes", strconv.Itoa(o.Nodes), "--root-dir", filepath.Join(o.Dir, "root")}
	if o.PodsPerNodeMax > 0 {
		args = append(args, "--pods-per-node-max", strconv.Itoa(o.PodsPerNodeMax))
	}
	if len(o.Args) > 0 {
		args = append(append(args, "--"), o.Args...)
	}
	logPath := filepath.Join(o.Dir, "hollow.log")
	p, err := startProc("speclet hollow", logPath, o.Bin, args...)
	if err != nil {
		return nil, err
	}
	p.grace = 30 * time.Second
	h := &Hollow{LogPath: logPath, p: p}
	return h, nil
}

// Pid is the process's id.
func (h *Hollow) Pid() int { return h.p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (h *Hollow) Exited() bool { return h.p.exited() }

// Stop sends SIGTERM and waits (30 s, then SIGKILL and an error).
func (h *Hollow) Stop() error {
	h.once.Do(func() { h.err = h.p.stop() })
	return h.err
}

// LogTail returns the last lines of the log.
func (h *Hollow) LogTail(lines int) string { return TailFile(h.LogPath, lines) }

// RSS is the resident set size of process pid in bytes (VmRSS of
// /proc/<pid>/status).
func RSS(pid int) (uint64, error) {
	mem, err := harness.ProcStatus(pid, "VmRSS")
	if err != nil {
		return 0, err
	}
	rss, ok := mem["VmRSS"]
	if !ok {
		return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return uint64(rss), nil
}

// qpsArgs are the client rate flags of the scheduler and the
// controller-manager (Options.ControlPlaneQPS).
func (c *Cluster) qpsArgs() []string {
	if c.opts.ControlPlaneQPS <= 0 {
		return nil
	}
	q := c.opts.ControlPlaneQPS
	return []string{"--kube-api-qps", strconv.Itoa(q), "--kube-api-burst", strconv.Itoa(2 * q)}
}
