package nodeconformance

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Doc markers: UpdateDoc replaces what lies between them.
const (
	docBegin = "<!-- results: written by `make node-conformance`; do not edit by hand -->"
	docEnd   = "<!-- /results -->"
)

// ReadCauses reads the known causes of differences: one "<spec name>\t<cause>"
// per line, or "re:<regexp>\t<cause>" for every spec whose speclet failure
// message the regexp matches ('#' comments and blank lines allowed).
func ReadCauses(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return map[string]string{}, nil
		}
		return nil, err
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, cause, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want \"<spec name>\\t<cause>\"", path, n)
		}
		m[name] = strings.TrimSpace(cause)
	}
	return m, sc.Err()
}

// Table renders the results of both agents as Markdown: the score line and
// one row per spec (kubelet's verdict, speclet's, and for a difference its
// cause, or the first line of speclet's failure when the cause is not known).
func Table(speclet, kubelet []Spec, causes map[string]string, when string) string {
	type row struct {
		k, s    Verdict
		sm, km  string
		present bool
	}
	rows := map[string]*row{}
	for _, s := range kubelet {
		rows[s.Name] = &row{k: s.Verdict, km: s.Message}
	}
	for _, s := range speclet {
		r := rows[s.Name]
		if r == nil {
			r = &row{}
			rows[s.Name] = r
		}
		r.s, r.sm, r.present = s.Verdict, s.Message, true
	}
	names := make([]string, 0, len(rows))
	for n := range rows {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "Run of %s.\n\n", when)
	fmt.Fprintf(&b, "    node conformance: speclet %d of %d, kubelet %d of %d\n\n", Count(speclet, Pass), len(speclet), Count(kubelet, Pass), len(kubelet))
	diffs := 0
	var rb strings.Builder
	rb.WriteString("| Spec | kubelet | speclet | Difference: cause |\n|---|---|---|---|\n")
	for _, n := range names {
		r := rows[n]
		kv, sv := string(r.k), string(r.s)
		if kv == "" {
			kv = "not run"
		}
		if !r.present {
			sv = "not run"
		}
		cause := ""
		if kv != sv {
			diffs++
			switch {
			case causes[n] != "":
				cause = causes[n]
			case patternCause(causes, r.sm) != "":
				cause = patternCause(causes, r.sm)
			case r.s == Fail:
				cause = "not yet known; speclet fails with: " + firstLine(r.sm)
			case r.k == Fail:
				cause = "not yet known; kubelet fails with: " + firstLine(r.km)
			default:
				cause = "not yet known"
			}
		} else if r.k == Skip {
			cause = "skipped on both: " + firstLine(r.km)
		}
		fmt.Fprintf(&rb, "| %s | %s | %s | %s |\n", cell(n), kv, sv, cell(cause))
	}
	fmt.Fprintf(&b, "%d specs differ.\n\n", diffs)
	b.WriteString(rb.String())
	return b.String()
}

// patternCause returns the cause of the first "re:<regexp>" entry of causes
// that matches msg (a failure message).
func patternCause(causes map[string]string, msg string) string {
	keys := make([]string, 0, len(causes))
	for k := range causes {
		if strings.HasPrefix(k, "re:") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if re, err := regexp.Compile(strings.TrimPrefix(k, "re:")); err == nil && msg != "" && re.MatchString(msg) {
			return causes[k]
		}
	}
	return ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// UpdateDoc replaces the results section of the Markdown file at path
// (between its markers) with table.
func UpdateDoc(path, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("update %s: %w", path, err)
	}
	s := string(b)
	i, j := strings.Index(s, docBegin), strings.Index(s, docEnd)
	if i < 0 || j < i {
		return fmt.Errorf("update %s: markers %q and %q not found", path, docBegin, docEnd)
	}
	s = s[:i+len(docBegin)] + "\n\n" + table + "\n" + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

// ReadNames reads one spec name per line ('#' comments, blank lines allowed).
func ReadNames(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		names = append(names, line)
	}
	return names, sc.Err()
}
