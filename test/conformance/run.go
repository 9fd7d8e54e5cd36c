package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// RemovalWait bounds the wait for a removed pod to leave GET /pods and the
// runtime. kubelet removes the dead containers of a deleted pod in its
// container GC, which runs once a minute.
const RemovalWait = 150 * time.Second

// StartWait bounds the wait for a scenario's anchor (see run).
const StartWait = 45 * time.Second

// started reports whether a normalized state shows that the agent got
// somewhere with the pod: a container running or terminated, or a waiting
// reason other than the start-up ones.
func started(state string) bool {
	if state == Absent {
		return false
	}
	for _, p := range strings.Split(state, " | ")[1:] {
		f := strings.Fields(p)
		if len(f) < 2 || strings.Contains(p, "=") && !strings.Contains(p, " r") {
			continue
		}
		if f[1] != "waiting(ContainerCreating)" && f[1] != "waiting(PodInitializing)" {
			return true
		}
	}
	return false
}

// Env is what a run needs besides the agent: the placeholder values that
// are the same for both agents.
type Env struct {
	Vars map[string]string
	// TempDir is where per-run directories ($HOSTDIR) are made.
	TempDir string
}

func writeAtomic(dir, name, text string) error {
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// Run runs scenario s on agent a: writes the manifest, samples GET /pods
// every second for s.Duration (carrying out the steps), records the final
// state and the runtime, removes the manifest and waits until the runtime
// holds nothing of the pod.
func Run(ctx context.Context, a *Agent, s *Scenario, env Env) *Result {
	r := &Result{Scenario: s.Name, Agent: string(a.Kind)}
	if err := run(ctx, a, s, env, r); err != nil {
		r.Error = err.Error()
	}
	return r
}

func run(ctx context.Context, a *Agent, s *Scenario, env Env, r *Result) error {
	vars := map[string]string{}
	for k, v := range env.Vars {
		vars[k] = v
	}
	hostDir, err := os.MkdirTemp(env.TempDir, "hostdir-"+s.Name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(hostDir)
	vars["HOSTDIR"] = hostDir
	// A port of this run for a server in a hostNetwork pod: the two agents
	// run a scenario side by side on one network namespace.
	port, err := freePort()
	if err != nil {
		return err
	}
	vars["PROBEPORT"] = fmt.Sprint(port)
	file := s.Name + ".yaml"
	full := s.Name + "-" + NodeName
	start := time.Now()
	if err := writeAtomic(a.Manifests, file, Expand(s.Files["pod.yaml"], vars)); err != nil {
		return err
	}
	var removedAt time.Time
	steps := append([]Step(nil), s.Steps...)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	sample := func() error {
		pods, err := a.Pods()
		if err != nil {
			return err
		}
		state := Absent
		for i := range pods {
			if pods[i].Name == full {
				state = Normalize(&pods[i])
			}
		}
		r.add(state, time.Since(start).Seconds())
		return nil
	}
	// The scenario's clock (steps, duration) starts at the anchor: the first
	// sample where the pod has got somewhere (a container ran, or reports
	// an error), so that an agent slow to start its first pod on a loaded
	// machine is sampled as long as a fast one. StartWait bounds the wait.
	var anchor time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if anchor.IsZero() && time.Since(start) >= StartWait {
			anchor = time.Now()
			r.Anchor = time.Since(start).Seconds()
		}
		var el time.Duration
		if !anchor.IsZero() {
			el = time.Since(anchor)
		}
		for !anchor.IsZero() && len(steps) > 0 && el >= steps[0].At {
			st := steps[0]
			steps = steps[1:]
			switch st.Action {
			case "apply":
				if err := writeAtomic(a.Manifests, file, Expand(s.Files[st.File], vars)); err != nil {
					return err
				}
			case "remove":
				if err := os.Remove(filepath.Join(a.Manifests, file)); err != nil {
					return err
				}
				removedAt = time.Now()
			}
		}
		if err := sample(); err != nil {
			return fmt.Errorf("sample at %s: %w", time.Since(start).Round(time.Second), err)
		}
		if !removedAt.IsZero() && r.RuntimeEmpty <= 0 {
			// removed by a step: time the removal while sampling goes on
			if _, n, err := a.RuntimeOf(ctx, full); err == nil && n == 0 {
				r.RuntimeEmpty = time.Since(removedAt).Seconds()
			}
		}
		if anchor.IsZero() && started(r.States[len(r.States)-1].State) {
			anchor = time.Now()
			r.Anchor = time.Since(start).Seconds()
		}
		if !anchor.IsZero() && el >= s.Duration {
			break
		}
	}
	if n := len(r.States); n > 0 {
		r.Final = r.States[n-1].State
	}
	desc, _, err := a.RuntimeOf(ctx, full)
	if err != nil {
		return err
	}
	r.Runtime = desc
	return remove(ctx, a, file, full, removedAt, r)
}

// remove removes the manifest (unless a step did, at removedAt) and times
// how long the pod takes to leave GET /pods and the runtime.
func remove(ctx context.Context, a *Agent, file, full string, removedAt time.Time, r *Result) error {
	t0 := removedAt
	if t0.IsZero() {
		t0 = time.Now()
		if err := os.Remove(filepath.Join(a.Manifests, file)); err != nil {
			return err
		}
	}
	empty := r.RuntimeEmpty // > 0: seen empty while sampling after a remove step
	r.GoneFromPods, r.RuntimeEmpty = -1, -1
	if empty > 0 {
		r.RuntimeEmpty = empty
	}
	for time.Since(t0) < RemovalWait {
		if r.GoneFromPods < 0 {
			if pods, err := a.Pods(); err == nil {
				found := false
				for i := range pods {
					found = found || pods[i].Name == full
				}
				if !found {
					r.GoneFromPods = time.Since(t0).Seconds()
				}
			}
		}
		if r.RuntimeEmpty < 0 {
			if _, n, err := a.RuntimeOf(ctx, full); err == nil && n == 0 {
				r.RuntimeEmpty = time.Since(t0).Seconds()
			}
		}
		if r.GoneFromPods >= 0 && r.RuntimeEmpty >= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("pod %s not gone within %s of its removal (GET /pods: %.1fs, runtime: %.1fs)", full, RemovalWait, r.GoneFromPods, r.RuntimeEmpty)
}

// RunAll runs the scenarios on each agent, pool scenarios at a time per
// agent (the agents run side by side), and returns the results per
// agent and scenario.
func RunAll(ctx context.Context, agents []*Agent, scenarios []*Scenario, env Env, pool int, progress func(*Result)) map[AgentKind]map[string]*Result {
	out := map[AgentKind]map[string]*Result{}
	for _, a := range agents {
		out[a.Kind] = map[string]*Result{}
	}
	var mu sync.Mutex
	sems := map[AgentKind]chan struct{}{}
	for _, a := range agents {
		sems[a.Kind] = make(chan struct{}, pool)
	}
	var wg sync.WaitGroup
	for _, s := range scenarios {
		for _, a := range agents {
			wg.Add(1)
			sem := sems[a.Kind]
			sem <- struct{}{} // in corpus order, pool at a time per agent
			go func(a *Agent, s *Scenario) {
				defer wg.Done()
				defer func() { <-sem }()
				res := Run(ctx, a, s, env)
				mu.Lock()
				out[a.Kind][s.Name] = res
				mu.Unlock()
				if progress != nil {
					progress(res)
				}
			}(a, s)
		}
	}
	wg.Wait()
	return out
}
