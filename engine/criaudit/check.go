package criaudit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/speclet/speclet/fsm"
)

// Mutating lists the CRI methods of cri.Full that change the runtime or
// run something in it; they may only be called inside a spec action or a
// caller's handler.
var Mutating = map[string]bool{
	"RunPodSandbox":    true,
	"StopPodSandbox":   true,
	"RemovePodSandbox": true,
	"CreateContainer":  true,
	"StartContainer":   true,
	"StopContainer":    true,
	"RemoveContainer":  true,
	"ExecSync":         true, // runs a command in the container: it can change anything there
	"PullImage":        true,
	"RemoveImage":      true,
	// The kubelet API's streaming calls prepare a session in which the
	// user runs commands, writes to a container's stdin or connects into
	// the pod's network namespace.
	"Exec":        true,
	"Attach":      true,
	"PortForward": true,
	// Log rotation: the runtime reopens a container's log file.
	"ReopenContainerLog": true,
}

// Reads lists the CRI methods of cri.Full that only read; they may be
// called outside actions (guards, PLEG, status, health).
var Reads = map[string]bool{
	"Version":             true,
	"Status":              true,
	"PodSandboxStatus":    true,
	"ListPodSandbox":      true,
	"ContainerStatus":     true,
	"ListContainers":      true,
	"GetContainerEvents":  true,
	"ImageStatus":         true,
	"ListImages":          true,
	"ImageFsInfo":         true,
	"ListContainerStats":  true,
	"ListPodSandboxStats": true,
}

// Kinds of Violation.
const (
	OutsideAction = "outside action" // a mutating call with no action or handler in its context
	Undeclared    = "undeclared"     // an action or handler called a method its spec does not allow
	UnknownAction = "unknown action" // the context names an action or handler the spec does not have
)

// Violation is a breach of the contract, with the number of records that
// show it.
type Violation struct {
	Kind                    string
	Machine, Action, Method string
	Count                   int
}

// Triple is a CRI method a machine's action declares (or a caller's
// handler: Machine is then the caller, Action the handler).
type Triple struct{ Machine, Action, Method string }

type actionDecl struct {
	cri   []string
	calls []string
}

type machineDecl struct {
	name    string
	actions []string // spec order
	byName  map[string]actionDecl
}

// machines describes every generated machine's actions; a machine added to
// the spec must be added here (TestEveryMachineDeclared checks the list
// against fsm).
var machines = sync.OnceValue(func() []machineDecl {
	return []machineDecl{
		describe(fsm.PodMachineName, fsm.PodActionCRI[:], fsm.PodActionCalls[:]),
		describe(fsm.ContainerMachineName, fsm.ContainerActionCRI[:], fsm.ContainerActionCalls[:]),
		describe(fsm.SandboxMachineName, fsm.SandboxActionCRI[:], fsm.SandboxActionCalls[:]),
		describe(fsm.ProbeMachineName, fsm.ProbeActionCRI[:], fsm.ProbeActionCalls[:]),
		describe(fsm.NodeMachineName, fsm.NodeActionCRI[:], fsm.NodeActionCalls[:]),
		describe(fsm.DevicePluginMachineName, fsm.DevicePluginActionCRI[:], fsm.DevicePluginActionCalls[:]),
	}
})

// callers describes the handlers of the callers outside the machines
// (spec/callers.hcl), one machineDecl per caller, in spec order.
var callers = sync.OnceValue(func() []machineDecl {
	var out []machineDecl
	for _, h := range fsm.Handlers {
		if len(out) == 0 || out[len(out)-1].name != h.Caller() {
			out = append(out, machineDecl{name: h.Caller(), byName: map[string]actionDecl{}})
		}
		c := &out[len(out)-1]
		c.actions = append(c.actions, h.String())
		c.byName[h.String()] = actionDecl{cri: fsm.HandlerCRI[h]}
	}
	return out
})

func describe[A interface {
	~uint8
	String() string
}](name string, cri [][]string, calls [][]A) machineDecl {
	m := machineDecl{name: name, byName: map[string]actionDecl{}}
	for i := range cri {
		a := A(i).String()
		d := actionDecl{cri: cri[i]}
		for _, c := range calls[i] {
			d.calls = append(d.calls, c.String())
		}
		m.actions = append(m.actions, a)
		m.byName[a] = d
	}
	return m
}

// lookup finds a machine, or a caller (the spec keeps their names apart).
func lookup(machine string) *machineDecl {
	for _, ms := range [][]machineDecl{machines(), callers()} {
		for i := range ms {
			if ms[i].name == machine {
				return &ms[i]
			}
		}
	}
	return nil
}

// Allowed returns the CRI methods action of machine may call: its own cri
// list and those of the actions its calls list names, transitively; for a
// caller's handler, its cri list. ok is false when the spec has no such
// action or handler.
func Allowed(machine, action string) (methods map[string]bool, ok bool) {
	m := lookup(machine)
	if m == nil {
		return nil, false
	}
	if _, ok := m.byName[action]; !ok {
		return nil, false
	}
	return m.allowed(action), true
}

// allowed walks action's cri list and, transitively, those of its calls.
func (m *machineDecl) allowed(action string) map[string]bool {
	methods := map[string]bool{}
	seen := map[string]bool{}
	var walk func(a string)
	walk = func(a string) {
		if seen[a] {
			return
		}
		seen[a] = true
		d := m.byName[a]
		for _, c := range d.cri {
			methods[c] = true
		}
		for _, c := range d.calls {
			walk(c)
		}
	}
	walk(action)
	return methods
}

// Declared returns every (machine, action, method) of the machines' cri
// lists (own lists only, not through calls), in spec order.
func Declared() []Triple { return triples(machines()) }

// DeclaredHandlers returns every (caller, handler, method) of the callers'
// cri lists (spec/callers.hcl), in spec order.
func DeclaredHandlers() []Triple { return triples(callers()) }

func triples(ms []machineDecl) []Triple {
	var out []Triple
	for _, m := range ms {
		for _, a := range m.actions {
			for _, c := range m.byName[a].cri {
				out = append(out, Triple{m.name, a, c})
			}
		}
	}
	return out
}

// Check returns the violations the records show, one per kind, action and
// method with its count, sorted.
func Check(records []Record) []Violation {
	type key struct{ kind, machine, action, method string }
	counts := map[key]int{}
	allowed := map[[2]string]map[string]bool{}
	for _, r := range records {
		if r.Machine == "" && r.Action == "" {
			if !Reads[r.Method] { // unknown methods count as mutating
				counts[key{OutsideAction, "", "", r.Method}]++
			}
			continue
		}
		k := [2]string{r.Machine, r.Action}
		ms, seen := allowed[k]
		if !seen {
			ms, _ = Allowed(r.Machine, r.Action)
			allowed[k] = ms
		}
		switch {
		case ms == nil:
			counts[key{UnknownAction, r.Machine, r.Action, r.Method}]++
		case !ms[r.Method]:
			counts[key{Undeclared, r.Machine, r.Action, r.Method}]++
		}
	}
	out := make([]Violation, 0, len(counts))
	for k, n := range counts {
		out = append(out, Violation{Kind: k.kind, Machine: k.machine, Action: k.action, Method: k.method, Count: n})
	}
	slices.SortFunc(out, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Machine, b.Machine), cmp.Compare(a.Action, b.Action), cmp.Compare(a.Method, b.Method))
	})
	return out
}

// Unseen returns the triples of declared (Declared, DeclaredHandlers or a
// part of them) that no record shows, in their order. Run it on the records
// of a whole suite.
func Unseen(records []Record, declared []Triple) []Triple {
	seen := map[Triple]bool{}
	for _, r := range records {
		seen[Triple{r.Machine, r.Action, r.Method}] = true
	}
	var out []Triple
	for _, t := range declared {
		if !seen[t] {
			out = append(out, t)
		}
	}
	return out
}

// FormatViolations renders violations as a table.
func FormatViolations(vs []Violation) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tMACHINE\tACTION\tMETHOD\tCALLS")
	for _, v := range vs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\n", v.Kind, dash(v.Machine), dash(v.Action), v.Method, v.Count)
	}
	w.Flush()
	return b.String()
}

// FormatUnseen renders unseen triples as a table.
func FormatUnseen(ts []Triple) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MACHINE\tACTION\tDECLARED METHOD NEVER CALLED")
	for _, t := range ts {
		fmt.Fprintf(w, "%s\t%s\t%s\n", t.Machine, t.Action, t.Method)
	}
	w.Flush()
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
