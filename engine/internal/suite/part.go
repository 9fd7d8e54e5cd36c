package suite

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/speclet/speclet/engine/criaudit"
)

// Part is what the tests of one of Parts took and called: the record a
// part leaves in $SPECLET_ENGINE_SUITE for the check of the union.
type Part struct {
	Name     string    `json:"name"`
	Recorded time.Time `json:"recorded"`
	// Taken counts the times each transition row and choice branch was
	// taken, by its rendering ("pod running -sync-> synced", "container
	// exited: [restart_allowed] -> waiting"): a record read back after the
	// spec changed counts for the rows it still has.
	Taken map[string]int `json:"taken"`
	// Calls counts the CRI calls by method and by the action (or handler)
	// they were made under: what the audit's Check and Unseen read.
	Calls []Calls `json:"calls"`
}

// Calls is the number of CRI calls of Method made under Machine's Action
// (both empty outside actions).
type Calls struct {
	Machine string `json:"machine,omitempty"`
	Action  string `json:"action,omitempty"`
	Method  string `json:"method"`
	N       int    `json:"n"`
}

// countCalls counts recs by machine, action and method, sorted.
func countCalls(recs []criaudit.Record) []Calls {
	type key struct{ machine, action, method string }
	n := map[key]int{}
	for _, r := range recs {
		n[key{r.Machine, r.Action, r.Method}]++
	}
	out := make([]Calls, 0, len(n))
	for k, c := range n {
		out = append(out, Calls{Machine: k.machine, Action: k.action, Method: k.method, N: c})
	}
	slices.SortFunc(out, func(a, b Calls) int {
		return cmp.Or(cmp.Compare(a.Machine, b.Machine), cmp.Compare(a.Action, b.Action), cmp.Compare(a.Method, b.Method))
	})
	return out
}

// records returns one criaudit.Record per call counted in p (the fields
// the audit reads).
func (p Part) records() []criaudit.Record {
	var out []criaudit.Record
	for _, c := range p.Calls {
		for range c.N {
			out = append(out, criaudit.Record{Machine: c.Machine, Action: c.Action, Method: c.Method})
		}
	}
	return out
}

// partFile is where part's record lives in dir.
func partFile(dir, part string) string {
	return filepath.Join(dir, strings.ReplaceAll(part, "/", "_")+".json")
}

// writePart records p in dir, replacing the record of an earlier run of
// the part at once (a reader sees the old or the new one, never a mix).
func writePart(dir string, p Part) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("record of %s: %w", p.Name, err)
	}
	f, err := os.CreateTemp(dir, ".part-*")
	if err != nil {
		return fmt.Errorf("record of %s in $%s: %w", p.Name, EnvDir, err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), partFile(dir, p.Name))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("record of %s in $%s: %w", p.Name, EnvDir, err)
	}
	return nil
}

// readPart reads the record of part from dir; ok is false when there is
// none.
func readPart(dir, part string) (p Part, ok bool, err error) {
	path := partFile(dir, part)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Part{}, false, nil
	}
	if err != nil {
		return Part{}, false, fmt.Errorf("record of %s: %w", part, err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return Part{}, false, fmt.Errorf("record of %s: %s: %w", part, path, err)
	}
	if p.Name != part {
		return Part{}, false, fmt.Errorf("record of %s: %s names the part %q", part, path, p.Name)
	}
	return p, true, nil
}
