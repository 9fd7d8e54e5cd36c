package suite

import (
	"context"
	"fmt"
	"log/slog"
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
	return cv
}

// coverKind adds the counters of kind k's rows and branches.
func coverKind[S, E, A, G fsm.Enum](cv *coverage, k fsm.Kind[S, E, A, G]) {
	cv.rows[k.Name] = make([]int, len(k.Transitions))
	cv.choices[k.Name] = make([]int, len(k.Choices))
}

// Logger returns a logger that counts the transitions the engine logs
// (for the part's row coverage) and passes every record inner handles on
// to it. The engine's Config.Log in every test of the parts.
func Logger(inner slog.Handler) *slog.Logger {
	return slog.New(handler{inner: inner, cov: current.cov})
}

type handler struct {
	inner slog.Handler
	cov   *coverage
}

func (h handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelDebug || h.inner.Enabled(ctx, l)
}

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "transition" {
		var machine string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "machine" {
				machine = a.Value.String()
				return false
			}
			return true
		})
		h.cov.count(machine, r)
	}
	if h.inner.Enabled(ctx, r.Level) {
		return h.inner.Handle(ctx, r)
	}
	return nil
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler {
	return handler{inner: h.inner.WithAttrs(as), cov: h.cov}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{inner: h.inner.WithGroup(name), cov: h.cov}
}

// count counts the row and choices attributes of a transition record.
func (cv *coverage) count(machine string, r slog.Record) {
	row := -1
	var choices []int
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "row":
			if a.Value.Kind() == slog.KindInt64 {
				row = int(a.Value.Int64())
			}
		case "choices":
			if cs, ok := a.Value.Any().([]int); ok {
				choices = cs
			}
		}
		return true
	})
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
