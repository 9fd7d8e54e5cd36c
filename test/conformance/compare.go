package conformance

import (
	"fmt"
	"slices"
	"strings"
)

// Equivalences: what the comparison forgives because it is timing, not
// semantics. Sampling is once a second on two agents that start the pod at
// different moments, so:
//
//  1. Leading "absent" samples are dropped: each agent notices the manifest
//     within its own file-check period.
//  2. A state seen in a single sample (except the final one) is dropped: a
//     state that lasts less than the sampling period is seen or missed by
//     chance (ContainerCreating for 300 ms, the Running of a container that
//     exits at once).
//  3. A start-up progress state (Pending, every container waiting in
//     ContainerCreating or PodInitializing, running, or completed with exit
//     0, nothing restarted) is dropped unless it is the final one: how long
//     an agent takes to create a sandbox and start containers is speed, not
//     semantics (kubelet needs seconds for its first pod).
//  4. In a loop (CrashLoopBackOff, ImagePullBackOff) the agents end at
//     different points of the same cycle: the final states match when each
//     agent's final state is among the stable states the other showed in
//     its last FinalWindow seconds; a final state that shows a dead
//     instance of a looping container that the same run showed dead or
//     backing off before (equivalence 5 at the end of the run) matches any
//     final state the other agent showed there, and, seen in a single
//     sample, the sequence without it may match too (equivalence 2 at the
//     end of the run).
//  5. A dead instance that is followed by a restart is shown for as long as
//     the agent takes to act on the death: kubelet until the sync after the
//     backoff began (observed 1 to 11 s), speclet until its restart decision
//     (under a second). A state where a container is terminated in a pod
//     that is Pending or Running is dropped when that container later shows
//     running or waiting(CrashLoopBackOff) again; its first death in a loop
//     also when a later state shows it restarted (a start that fails again
//     before it runs, as with a failing postStart hook).
//  6. A Succeeded or Failed pod whose sandbox still runs
//     (PodReadyToStartContainers=True) is dropped unless final: how fast
//     the sandbox of a finished pod is stopped is speed.
//  7. A container that shows CrashLoopBackOff anywhere in either run is in
//     a loop: in a Pending or Running pod its dead instance and its backoff
//     are one state, dead(reason,exit) rN. Which of the two an agent shows
//     during the backoff is when its status was last generated: kubelet
//     often shows terminated for the whole 10 s backoff, sometimes
//     CrashLoopBackOff; speclet shows CrashLoopBackOff.
//  8. A container that shows ImagePullBackOff anywhere in either run is in
//     a pull loop: its ErrImagePull (the attempt) and ImagePullBackOff (the
//     wait) are one state, waiting(pull-failing). kubelet shows ErrImagePull
//     for ~12 s after each attempt (one sync late), speclet for 1 s.
//  9. A container that shows CrashLoopBackOff in a run is in a loop in
//     that run: there, a failed start's reason (PostStartHookError,
//     CreateContainerError) over a dead instance is one state with the
//     backoff, dead(reason,exit) rN. Each agent shows the reason of the
//     failed attempt until its next sync: kubelet 1 to 14 s (observed),
//     speclet 1 s. Only the agent's own CrashLoopBackOff counts here: an
//     agent that kept the start error through the whole backoff never
//     shows CrashLoopBackOff, and still differs.
// 10. Only the first appearance of each state counts: a crash loop cycles
//     Running -> Error -> CrashLoopBackOff as many times as the run lasts,
//     and restartCount is already bucketed to 0, 1, 2+ (Normalize).
// 11. A Running pod whose regular containers all terminated while a sidecar
//     still runs is dropped unless final: both agents keep the phase
//     Running until the sidecars stopped (a Succeeded pod with a running
//     sidecar is a different state and still differs), and how long that
//     lasts is how soon each agent stops them (kubelet at its next sync,
//     speclet at once) and how fast the sidecar exits on SIGTERM: in two
//     runs at normal load each agent showed it for 2 samples in one run and
//     at most 1 in the other (sidecar-never, sidecar-onfailure).
//
// What remains must be equal: the final state and the sequence of states.
// Times (Seen.At) and removal times are reported, never compared.

// Key returns the sequence that is compared after the equivalences.
func Key(states []Seen) []string {
	i := 0
	for i < len(states) && states[i].State == Absent {
		i++
	}
	var stable []string
	for ; i < len(states); i++ {
		s := states[i]
		last := i == len(states)-1
		if !last && (s.Count < 2 || progress(s.State) || sandboxLingers(s.State) || sidecarsStopping(s.State)) {
			continue
		}
		stable = append(stable, s.State)
	}
	var out []string
	seen := map[string]bool{}
	for i, st := range stable {
		if i < len(stable)-1 && betweenInstances(st, stable[i+1:]) {
			continue
		}
		if seen[st] {
			continue
		}
		seen[st] = true
		out = append(out, st)
	}
	return out
}

// containers returns the container parts of a normalized state by name
// ("init:x" for init containers): "NAME STATE rN [last=..] [ready] [started]".
func containers(state string) map[string][]string {
	out := map[string][]string{}
	for _, p := range strings.Split(state, " | ")[1:] {
		f := strings.Fields(p)
		if len(f) >= 3 && strings.HasPrefix(f[2], "r") && !strings.Contains(f[0], "=") {
			out[f[0]] = f[1:]
		}
	}
	return out
}

// betweenInstances (equivalence 5) reports whether state shows a
// container terminated in a pending or running pod that later runs or
// backs off again.
func betweenInstances(state string, later []string) bool {
	if !strings.HasPrefix(state, "Pending ") && !strings.HasPrefix(state, "Running ") {
		return false
	}
	for name, f := range containers(state) {
		// A looping container's first death (dead r0) is followed by the
		// immediate restart; later deaths are its backoff (equivalence 7).
		firstDeath := strings.HasPrefix(f[0], "dead(") && f[1] == "r0"
		if !strings.HasPrefix(f[0], "terminated(") && !firstDeath {
			continue
		}
		for _, l := range later {
			g, ok := containers(l)[name]
			if ok && (g[0] == "running" || g[0] == "waiting(CrashLoopBackOff)") {
				return true
			}
			// The first death followed by a later instance (a start
			// that fails again, e.g. its postStart hook, never runs).
			if ok && firstDeath && g[1] != "r0" {
				return true
			}
		}
	}
	return false
}

// sandboxLingers (equivalence 6) reports a finished pod whose sandbox still
// runs.
func sandboxLingers(state string) bool {
	return (strings.HasPrefix(state, "Succeeded ") || strings.HasPrefix(state, "Failed ")) &&
		strings.Contains(state, " PodReadyToStartContainers=True")
}

// sidecarsStopping (equivalence 11) reports a running pod whose regular
// containers all terminated while a sidecar (an init container that runs)
// still runs.
func sidecarsStopping(state string) bool {
	if !strings.HasPrefix(state, "Running ") {
		return false
	}
	regular, sidecar := 0, false
	for name, f := range containers(state) {
		if strings.HasPrefix(name, "init:") {
			sidecar = sidecar || f[0] == "running"
			continue
		}
		if !strings.HasPrefix(f[0], "terminated(") {
			return false
		}
		regular++
	}
	return regular > 0 && sidecar
}

// Verdict compares speclet's result with kubelet's.
type Verdict struct {
	Scenario string
	Match    bool
	Reasons  []string // why not, one line each
	// RuntimeDiffers is set when the runtime held different things at the
	// final sample (reported apart from Match: see docs/conformance.md).
	RuntimeDiffers bool
}

// Compare applies the equivalences to both results.
func Compare(kubelet, speclet *Result) Verdict {
	v := Verdict{Scenario: kubelet.Scenario, Match: true}
	fail := func(format string, args ...any) {
		v.Match = false
		v.Reasons = append(v.Reasons, fmt.Sprintf(format, args...))
	}
	if kubelet.Error != "" {
		fail("kubelet run failed: %s", kubelet.Error)
	}
	if speclet.Error != "" {
		fail("speclet run failed: %s", speclet.Error)
	}
	loop := loopers(kubelet, speclet)
	// Equivalence 4's dead instance is read before canon rewrites it.
	kDead, sDead := deadInLoop(kubelet, loop), deadInLoop(speclet, loop)
	kubelet, speclet = canonResult(kubelet, loop, loopers(kubelet)), canonResult(speclet, loop, loopers(speclet))
	if kubelet.Final != speclet.Final && !((inWindow(kubelet.Final, speclet) || kDead) && (inWindow(speclet.Final, kubelet) || sDead)) {
		fail("final state differs:\n    kubelet: %s\n    speclet: %s", kubelet.Final, speclet.Final)
	}
	kk, sk := keys(kubelet, kDead), keys(speclet, sDead)
	if !slices.ContainsFunc(kk, func(k string) bool { return slices.Contains(sk, k) }) {
		fail("state sequence differs:\n    kubelet:\n      %s\n    speclet:\n      %s",
			strings.ReplaceAll(kk[0], "\n", "\n      "), strings.ReplaceAll(sk[0], "\n", "\n      "))
	}
	v.RuntimeDiffers = kubelet.Runtime != speclet.Runtime
	return v
}

// progress reports whether a normalized state is start-up progress
// (equivalence 3).
func progress(state string) bool {
	parts := strings.Split(state, " | ")
	if !strings.HasPrefix(parts[0], "Pending ") {
		return false
	}
	if len(containers(state)) == 0 {
		return true // no status generated yet
	}
	for _, p := range parts[1:] {
		if strings.Contains(p, "=") && !strings.Contains(p, " r") {
			continue // the conditions
		}
		f := strings.Fields(p)
		if len(f) < 3 || f[2] != "r0" {
			return false
		}
		switch f[1] {
		case "waiting(ContainerCreating)", "waiting(PodInitializing)", "running", "terminated(Completed,0)":
		default:
			return false
		}
		if strings.Contains(p, " last=") {
			return false
		}
	}
	return true
}

// FinalWindow is the end of a run whose stable states count as final
// (equivalence 4).
const FinalWindow = 25.0

// inWindow reports whether state is the final state of r or a stable state
// (two samples or more) r showed in its last FinalWindow seconds.
func inWindow(state string, r *Result) bool {
	if state == r.Final {
		return true
	}
	n := len(r.States)
	if n == 0 {
		return false
	}
	end := r.States[n-1].At + float64(r.States[n-1].Count-1)
	for _, s := range r.States {
		last := s.At + float64(s.Count-1)
		if s.State == state && s.Count >= 2 && last >= end-FinalWindow {
			return true
		}
	}
	return false
}

// deadInLoop reports whether r ended on a dead instance (a container
// terminated or in CrashLoopBackOff, one state by equivalence 7, in a
// pending or running pod) of a container in a loop (loop: equivalence 7)
// that r showed dead or in CrashLoopBackOff before: kubelet may show
// terminated through a whole backoff and never CrashLoopBackOff, speclet
// CrashLoopBackOff from the death on.
// r is a result as sampled, before canon (which writes both the dead
// instance and the backoff as dead(...)).
func deadInLoop(r *Result, loop map[string]bool) bool {
	if !strings.HasPrefix(r.Final, "Pending ") && !strings.HasPrefix(r.Final, "Running ") || len(r.States) == 0 {
		return false
	}
	before := r.States[:len(r.States)-1]
	for name, f := range containers(r.Final) {
		if !loop[name] || !strings.HasPrefix(f[0], "terminated(") && f[0] != "waiting(CrashLoopBackOff)" {
			continue
		}
		for _, s := range before {
			if g, ok := containers(s.State)[name]; ok && (g[0] == "waiting(CrashLoopBackOff)" || strings.HasPrefix(g[0], "terminated(")) {
				return true
			}
		}
	}
	return false
}

// keys returns the sequences r's states may be compared by, each Key
// joined by newlines, the whole run's first. When r ended dead in a loop
// and showed that final dead instance in a single sample, the sequence
// without it is a second one (equivalence 4: the run ended at the moment
// the next cycle began, and the other agent, a cycle behind, still ran that
// instance; equivalence 2 drops such a sample anywhere else in the run).
func keys(r *Result, dead bool) []string {
	out := []string{strings.Join(Key(r.States), "\n")}
	if n := len(r.States); dead && n > 1 && r.States[n-1].Count < 2 {
		out = append(out, strings.Join(Key(r.States[:n-1]), "\n"))
	}
	return out
}

// loopers returns the containers that show CrashLoopBackOff in any of rs
// (equivalence 7), and "NAME pull" for those that show ImagePullBackOff
// (equivalence 8).
func loopers(rs ...*Result) map[string]bool {
	out := map[string]bool{}
	for _, r := range rs {
		for _, st := range r.States {
			for name, f := range containers(st.State) {
				if f[0] == "waiting(CrashLoopBackOff)" {
					out[name] = true
				}
				if f[0] == "waiting(ImagePullBackOff)" {
					out[name+" pull"] = true
				}
			}
		}
	}
	return out
}

// canon rewrites the dead instance and the backoff of a looping container
// in a Pending or Running pod as dead(reason,exit) rN (equivalence 7), and,
// for a container that loops in this run (self), a failed start's reason
// over a dead instance too (equivalence 9).
func canon(state string, loop, self map[string]bool) string {
	if len(loop) == 0 || !strings.HasPrefix(state, "Pending ") && !strings.HasPrefix(state, "Running ") {
		return state
	}
	parts := strings.Split(state, " | ")
	for i := 1; i < len(parts); i++ {
		f := strings.Fields(parts[i])
		if len(f) >= 2 && loop[f[0]+" pull"] && (f[1] == "waiting(ErrImagePull)" || f[1] == "waiting(ImagePullBackOff)") {
			f[1] = "waiting(pull-failing)"
			parts[i] = strings.Join(f, " ")
			continue
		}
		if len(f) < 3 || !loop[f[0]] || !strings.HasPrefix(f[2], "r") {
			continue
		}
		switch {
		case strings.HasPrefix(f[1], "terminated("):
			parts[i] = f[0] + " dead(" + strings.TrimSuffix(strings.TrimPrefix(f[1], "terminated("), ")") + ") " + f[2]
		case f[1] == "waiting(CrashLoopBackOff)",
			self[f[0]] && (f[1] == "waiting(PostStartHookError)" || f[1] == "waiting(CreateContainerError)"):
			for _, g := range f[3:] {
				if last, ok := strings.CutPrefix(g, "last="); ok {
					parts[i] = f[0] + " dead(" + strings.Replace(last, "/", ",", 1) + ") " + f[2]
				}
			}
		}
	}
	return strings.Join(parts, " | ")
}

// canonResult is r with every state canonicalized and consecutive equal
// states merged.
func canonResult(r *Result, loop, self map[string]bool) *Result {
	c := *r
	c.States = nil
	for _, st := range r.States {
		st.State = canon(st.State, loop, self)
		if n := len(c.States); n > 0 && c.States[n-1].State == st.State {
			c.States[n-1].Count += st.Count
			continue
		}
		c.States = append(c.States, st)
	}
	c.Final = canon(r.Final, loop, self)
	return &c
}
