package suite

import (
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/speclet/speclet/fsm"
)

// coverage counts how often each transition row and choice branch was taken.
type coverage struct {
	mu      sync.Mutex
	rows    map[string][]int // machine -> count per transition row
	choices map[string][]int // machine -> count per choice branch
}

func newCoverage() *coverage {
	cv := &coverage{rows: map[string][]int{}, choices: map[string][]int{}}
	coverKind(cv, fsm.PodKind)
	coverKind(cv, fsm.ContainerKind)
	coverKind(cv, fsm.SandboxKind)
	coverKind(cv, fsm.ProbeKind)
	coverKind(cv, fsm.NodeKind)
	coverKind(cv, fsm.DevicePluginKind)
	return cv
}

// coverKind adds the counters of kind k's rows and branches.
func coverKind[S, E, A, G fsm.Enum](cv *coverage, k fsm.Kind[S, E, A, G]) {
	cv.rows[k.Name] = make([]int, len(k.Transitions))
	cv.choices[k.Name] = make([]int, len(k.Choices))
}

// Took counts a step that a machine of kind machine (fsm.<Machine>Kind's
// Name) took, row of the kind's Transitions through the branches choices
// of its Choices, in the part's row coverage. Tests give it to the engine
// as Config.Steps (a Step's Machine, Row and Choices); a row or branch
// outside the kind's tables is not counted.
func Took(machine string, row int, choices []int) { current.cov.count(machine, row, choices) }

// count counts row and choices of a step machine took.
func (cv *coverage) count(machine string, row int, choices []int) {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	if rows := cv.rows[machine]; row >= 0 && row < len(rows) {
		rows[row]++
	}
	for _, c := range choices {
		if cs := cv.choices[machine]; c >= 0 && c < len(cs) {
			cs[c]++
		}
	}
}

// taken returns the count of every row and branch by its String.
func (cv *coverage) taken() map[string]int {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	out := map[string]int{}
	for _, r := range specRows() {
		if r.choice {
			out[r.String()] = cv.choices[r.machine][r.index]
		} else {
			out[r.String()] = cv.rows[r.machine][r.index]
		}
	}
	return out
}

// row is a transition row or a choice branch of the spec; its String is
// its key in a Part's Taken (unique, TestRowKeys).
type row struct {
	machine, from, event, guard, to string
	choice                          bool
	index                           int // in the kind's Transitions or Choices
}

func (r row) String() string {
	if r.choice {
		return fmt.Sprintf("%s %s: [%s] -> %s", r.machine, r.from, r.guard, r.to)
	}
	g := ""
	if r.guard != "" {
		g = " [" + r.guard + "]"
	}
	return fmt.Sprintf("%s %s -%s%s-> %s", r.machine, r.from, r.event, g, r.to)
}

// specRows returns every transition row and choice branch of every
// machine, in the table's order.
func specRows() []row {
	var out []row
	out = kindRows(out, fsm.PodKind)
	out = kindRows(out, fsm.SandboxKind)
	out = kindRows(out, fsm.ProbeKind)
	out = kindRows(out, fsm.NodeKind)
	out = kindRows(out, fsm.DevicePluginKind)
	return kindRows(out, fsm.ContainerKind)
}

// kindRows appends the rows, then the choice branches, of kind k.
func kindRows[S, E, A, G fsm.Enum](out []row, k fsm.Kind[S, E, A, G]) []row {
	for i, r := range k.Transitions {
		guard, to := "", r.To.String()
		if r.HasGuard {
			guard = r.Guard.String()
		}
		if r.Internal {
			to = "(internal)"
		}
		out = append(out, row{k.Name, r.From.String(), r.Event.String(), guard, to, false, i})
	}
	for i, c := range k.Choices {
		guard := "otherwise"
		if c.HasGuard {
			guard = c.Guard.String()
		}
		out = append(out, row{k.Name, c.State.String(), "", guard, c.To.String(), true, i})
	}
	return out
}

// sum is how often the parts took the row or branch key.
func sum(parts []Part, key string) int {
	n := 0
	for _, p := range parts {
		n += p.Taken[key]
	}
	return n
}

// formatTable renders the table: transitions as machine, from, event,
// [guard], to and times taken; then choice branches as "state: [guard] ->
// to". With several parts a column per part follows the total.
func formatTable(rows []row, parts []Part) string {
	var head string
	if len(parts) > 1 {
		for _, p := range parts {
			head += "\t" + strings.ToUpper(p.Name[strings.LastIndexByte(p.Name, '/')+1:])
		}
	}
	counts := func(key string) string {
		s := fmt.Sprint(sum(parts, key))
		if len(parts) > 1 {
			for _, p := range parts {
				s += fmt.Sprintf("\t%d", p.Taken[key])
			}
		}
		return s
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MACHINE\tFROM\tEVENT\t[GUARD]\tTO\tTAKEN"+head)
	for _, r := range rows {
		if r.choice {
			continue
		}
		g := ""
		if r.guard != "" {
			g = "[" + r.guard + "]"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.machine, r.from, r.event, g, r.to, counts(r.String()))
	}
	w.Flush()
	b.WriteString("\n")
	w = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MACHINE\tCHOICE BRANCH\tTAKEN"+head)
	for _, r := range rows {
		if r.choice {
			fmt.Fprintf(w, "%s\t%s: [%s] -> %s\t%s\n", r.machine, r.from, r.guard, r.to, counts(r.String()))
		}
	}
	w.Flush()
	return b.String()
}
