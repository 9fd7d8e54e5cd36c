package kubeletapi

import (
	"context"
	"fmt"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/speclet/speclet/engine/cgroupstats"
)

// DefaultStatsMaxAge is how long one housekeeping pass serves
// /stats/summary, /metrics/resource and /metrics/cadvisor: the
// housekeeping interval of kubelet's cAdvisor (10 s; its dynamic
// housekeeping stretches it to 15 s for containers whose stats do not
// change), whose cache kubelet serves those pages from. No value is older
// than kubelet's could be.
const DefaultStatsMaxAge = 10 * time.Second

// StatsCache keeps the latest housekeeping pass: the runtime's container
// stats and the readings of the node's cgroups (and the pages built from
// them), taken at one time and served to every request within its max
// age, as kubelet serves its stats from cAdvisor's housekeeping cache.
// A pass is made on demand (nothing is read while nobody asks) and anew
// when it is older than the max age, when the clock went back, or when
// the runtime's ready sandboxes or running containers are not the ones it
// read (a pod that came or went is seen at the next request, as kubelet
// lists the runtime's pods at each request). Concurrent requests that find
// it stale wait for one pass. It also keeps what rates and usage need from
// one pass to the next (CPU readings, directory usage).
//
// Give the node's two APIs (10250 and the read-only port) the same one
// (Config.Stats), so that they share the passes as kubelet's ports share
// cAdvisor's cache. Safe for concurrent use.
type StatsCache struct {
	maxAge time.Duration

	mu  sync.Mutex
	cur *pass

	cpu   nodeCPU
	rates cpuRates // the cgroups' previous CPU readings
	du    duCache  // directories' usage (volumes, logs)
}

// NewStatsCache returns a cache whose passes serve for maxAge; 0 is
// DefaultStatsMaxAge, a negative one reuses no pass (each request makes
// its own).
func NewStatsCache(maxAge time.Duration) *StatsCache {
	if maxAge == 0 {
		maxAge = DefaultStatsMaxAge
	}
	return &StatsCache{maxAge: maxAge}
}

// listing is what a pass asks the runtime: the ready sandboxes, the
// running containers, their stats, and the cgroup of each (by ID).
type listing struct {
	sbs    []*runtimeapi.PodSandbox
	cs     []*runtimeapi.Container
	cstats []*runtimeapi.ContainerStats
	where  map[string]string // sandbox or container ID -> cgroup
}

// pass is one housekeeping pass, read at one time.
type pass struct {
	at  time.Time
	ls  *listing
	ids map[string]bool                    // the sandboxes and containers of ls
	cg  map[string]cgroupstats.Stats       // by cgroup ("/" the root); absent: not readable
	net map[string][]cgroupstats.Interface // by cgroup of a sandbox ("/": the host's), its network namespace's

	// the pages, built from the pass at their first request: the summary
	// and the cAdvisor series (gathered: Gather's answer)
	summary   *statsapi.Summary
	families  []*dto.MetricFamily
	gatherErr error
	gathered  bool
}

// objects lists the ready sandboxes and the running containers: each
// request asks them, to know whether the pass still describes the node.
func (a *API) objects(ctx context.Context) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container, error) {
	sbs, err := a.c.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return nil, nil, fmt.Errorf("list sandboxes: %w", err)
	}
	cs, err := a.c.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, nil, fmt.Errorf("list containers: %w", err)
	}
	return sbs, cs, nil
}

// withPass calls f with a pass that describes the node now, made anew
// when the cache's is stale; f runs under the cache's lock (it builds the
// pass's pages).
func (a *API) withPass(ctx context.Context, f func(*pass)) error {
	sbs, cs, err := a.objects(ctx)
	if err != nil {
		return err
	}
	c := a.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	now := a.c.Now()
	if p := c.cur; p == nil || c.maxAge < 0 || now.Before(p.at) || now.Sub(p.at) >= c.maxAge || !p.describes(sbs, cs) {
		p, err := a.readPass(ctx, now, sbs, cs)
		if err != nil {
			return err
		}
		c.cur = p
	}
	f(c.cur)
	return nil
}

// describes is whether sbs and cs are the sandboxes and containers p read.
func (p *pass) describes(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) bool {
	if len(sbs)+len(cs) != len(p.ids) {
		return false
	}
	for _, sb := range sbs {
		if !p.ids[sb.Id] {
			return false
		}
	}
	for _, c := range cs {
		if !p.ids[c.Id] {
			return false
		}
	}
	return true
}

// readPass asks the runtime for the containers' stats and reads the cgroups of the root, of each pod, of its sandbox (and its
// network namespace's interfaces) and of its running containers.
func (a *API) readPass(ctx context.Context, now time.Time, sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) (*pass, error) {
	cstats, err := a.c.Runtime.ListContainerStats(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list container stats: %w", err)
	}
	ls := &listing{sbs: sbs, cs: cs, cstats: cstats, where: map[string]string{}}
	p := &pass{at: now, ls: ls, ids: map[string]bool{}, cg: map[string]cgroupstats.Stats{}, net: map[string][]cgroupstats.Interface{}}
	ids := make([]string, 0, len(sbs)+len(cs))
	for _, sb := range sbs {
		ids = append(ids, sb.Id)
		p.ids[sb.Id] = true
	}
	for _, c := range cs {
		ids = append(ids, c.Id)
		p.ids[c.Id] = true
	}
	if a.finder != nil {
		ls.where = a.finder.Find(ids)
		a.finder.Prune(p.ids)
	}
	d := a.dirs
	if d == nil {
		return p, nil
	}
	read := func(rel string, processes bool) {
		if _, ok := p.cg[rel]; ok {
			return
		}
		if st, err := d.Read(rel, processes, now); err == nil {
			p.cg[rel] = st
		}
	}
	read("/", false)
	if ifs, err := d.Network(0); err == nil {
		p.net["/"] = ifs
	}
	for _, sb := range sbs {
		uid := a.podUID(sb.Labels)
		sbPath, ok := ls.where[sb.Id]
		if uid == "" || !ok {
			continue
		}
		if pc := podCgroup(sbPath, uid); pc != "" {
			read(pc, true)
		}
		read(sbPath, true)
		if st, ok := p.cg[sbPath]; ok && st.Pid != 0 {
			if ifs, err := d.Network(st.Pid); err == nil {
				p.net[sbPath] = ifs
			}
		}
	}
	for _, c := range cs {
		if rel, ok := ls.where[c.Id]; ok {
			read(rel, true)
		}
	}
	return p, nil
}

// reading is the pass's reading of the cgroup of a sandbox or container
// (by ID); nil when it has none.
func (p *pass) reading(id string) *cgroupstats.Stats {
	rel, ok := p.ls.where[id]
	if !ok {
		return nil
	}
	return p.cgroup(rel)
}

// cgroup is the pass's reading of cgroup rel; nil when it was not read.
func (p *pass) cgroup(rel string) *cgroupstats.Stats {
	st, ok := p.cg[rel]
	if !ok {
		return nil
	}
	return &st
}
