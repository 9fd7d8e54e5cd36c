package nodeconformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Verdict of one spec on one agent.
type Verdict string

const (
	Pass Verdict = "PASS"
	Fail Verdict = "FAIL"
	// Skip: the spec skipped itself at run time, or Skips lists it.
	Skip Verdict = "SKIP"
)

// Spec is one spec's result.
type Spec struct {
	Name    string
	Verdict Verdict
	// Message is the failure (or skip) message; Location where it
	// happened (file:line in k8s.io/kubernetes).
	Message, Location string
	Duration          time.Duration
}

// ginkgoReport is the part of Ginkgo's JSON report (--json-report) read
// here: a list of suite reports.
type ginkgoReport []struct {
	SuiteSucceeded             bool
	SpecialSuiteFailureReasons []string
	SpecReports                []struct {
		ContainerHierarchyTexts []string
		LeafNodeType            string
		LeafNodeText            string
		LeafNodeLocation        struct {
			FileName   string
			LineNumber int
		}
		State   string
		RunTime time.Duration
		Failure struct {
			Message  string
			Location struct {
				FileName   string
				LineNumber int
			}
			FailureNodeType string
			ForwardedPanic  string
		}
	}
}

// readReport returns the specs (It nodes) of a Ginkgo JSON report that were
// selected to run: a spec filtered out by focus, skip or labels is left out;
// one that called Skip is kept as Skip. Failures of suite-level nodes
// (SynchronizedBeforeSuite, ...) are returned as suiteErr.
func readReport(path string) (specs []Spec, suiteErr error, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read ginkgo report: %w", err)
	}
	var r ginkgoReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, nil, fmt.Errorf("read ginkgo report %s: %w", path, err)
	}
	var suite []string
	for _, s := range r {
		suite = append(suite, s.SpecialSuiteFailureReasons...)
		for _, sr := range s.SpecReports {
			loc := func(f string, l int) string {
				if f == "" {
					return ""
				}
				return fmt.Sprintf("%s:%d", f, l)
			}
			msg := sr.Failure.Message
			if sr.Failure.ForwardedPanic != "" {
				msg += "\npanic: " + sr.Failure.ForwardedPanic
			}
			if sr.LeafNodeType != "It" {
				if sr.State != "passed" && sr.State != "skipped" {
					suite = append(suite, fmt.Sprintf("%s %s: %s", sr.LeafNodeType, sr.State, msg))
				}
				continue
			}
			sp := Spec{
				Name:     strings.TrimSpace(strings.Join(append(append([]string{}, sr.ContainerHierarchyTexts...), sr.LeafNodeText), " ")),
				Message:  strings.TrimSpace(msg),
				Location: loc(sr.Failure.Location.FileName, sr.Failure.Location.LineNumber),
				Duration: sr.RunTime,
			}
			switch sr.State {
			case "passed":
				sp.Verdict = Pass
			case "skipped":
				if sr.Failure.Message == "" {
					continue // filtered out
				}
				sp.Verdict = Skip
			case "pending":
				continue
			default: // failed, panicked, timedout, interrupted, aborted
				sp.Verdict = Fail
				if sp.Message == "" {
					sp.Message = sr.State
				}
			}
			specs = append(specs, sp)
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	if len(suite) > 0 {
		suiteErr = fmt.Errorf("suite: %s", strings.Join(suite, "; "))
	}
	return specs, suiteErr, nil
}

// WriteVerdicts writes one line per spec, "PASS|FAIL|SKIP <name>", sorted
// by name.
func WriteVerdicts(path string, specs []Spec) error {
	var b strings.Builder
	for _, s := range specs {
		fmt.Fprintf(&b, "%s %s\n", s.Verdict, s.Name)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// ReadVerdicts reads a file WriteVerdicts wrote: spec name to verdict.
func ReadVerdicts(path string) (map[string]Verdict, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]Verdict{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		v, name, ok := strings.Cut(line, " ")
		switch Verdict(v) {
		case Pass, Fail, Skip:
		default:
			ok = false
		}
		if !ok || name == "" {
			return nil, fmt.Errorf("%s:%d: want \"PASS|FAIL|SKIP <spec name>\", got %q", path, n, line)
		}
		m[name] = Verdict(v)
	}
	return m, sc.Err()
}

// WriteFailures writes every failed spec with its message and location.
func WriteFailures(path string, specs []Spec) error {
	var b strings.Builder
	for _, s := range specs {
		if s.Verdict != Fail {
			continue
		}
		fmt.Fprintf(&b, "=== FAIL %s\n", s.Name)
		if s.Location != "" {
			fmt.Fprintf(&b, "at %s\n", s.Location)
		}
		fmt.Fprintf(&b, "%s\n\n", s.Message)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// Count returns how many specs have verdict v.
func Count(specs []Spec, v Verdict) int {
	n := 0
	for _, s := range specs {
		if s.Verdict == v {
			n++
		}
	}
	return n
}

// Differences lists, one line each, the specs kubelet passes and speclet
// does not ("speclet FAIL, kubelet PASS: <spec>"), then the reverse.
func Differences(speclet, kubelet []Spec) []string {
	k := map[string]Verdict{}
	for _, s := range kubelet {
		k[s.Name] = s.Verdict
	}
	var worse, better []string
	for _, s := range speclet {
		kv, ok := k[s.Name]
		if !ok || kv == s.Verdict {
			continue
		}
		line := fmt.Sprintf("speclet %s, kubelet %s: %s", s.Verdict, kv, s.Name)
		if kv == Pass {
			worse = append(worse, line)
		} else {
			better = append(better, line)
		}
	}
	return append(worse, better...)
}

// ReadResult reads the Result of an earlier run from its directory (the
// report.json Ginkgo wrote there).
func ReadResult(agent, dir string) (*Result, error) {
	specs, suiteErr, err := readReport(filepath.Join(dir, "report.json"))
	if err != nil {
		return nil, err
	}
	if suiteErr != nil {
		err = fmt.Errorf("%s: earlier run incomplete: %v", agent, suiteErr)
	}
	return &Result{Agent: agent, Specs: specs, JUnit: filepath.Join(dir, "junit.xml")}, err
}
