package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Scenario is one file of testdata/scenarios: a header of directives, then
// named sections (txtar-like, "-- name --" lines). The section "pod.yaml" is
// the manifest written at the start; other sections are used by steps.
//
//	duration: 40s            how long the pod is sampled after its anchor (<= 90s)
//	fast: true               part of the subset `go test ./...` runs
//	step 20s apply pod2.yaml replace the manifest with section pod2.yaml
//	step 30s remove          remove the manifest mid-way
//
// Durations and step offsets count from the anchor: the first sample where
// a container ran or reports an error (see Run), not from the write.
//
//	# anything               a comment (what the scenario checks)
//
// Manifests use placeholders filled per agent run: $IMAGE (busybox on the
// harness registry), $PAUSE, $MISSING (a tag the registry does not have),
// $HOOKPORT (an HTTP server of the harness on 127.0.0.1 answering 200),
// $DEADPORT (a closed port on 127.0.0.1), $HOSTDIR (a fresh directory for
// hostPath volumes), $PROBEPORT (a port free on 127.0.0.1, one per run, for
// a server in a hostNetwork pod that probes reach).
type Scenario struct {
	Name     string
	Comment  string
	Duration time.Duration
	Fast     bool
	Steps    []Step
	Files    map[string]string
}

// Step is one action at an offset from the manifest's first write.
type Step struct {
	At     time.Duration
	Action string // "apply" or "remove"
	File   string // for apply
}

// MaxDuration bounds a scenario's sampled lifetime.
const MaxDuration = 90 * time.Second

// LoadScenarios reads every *.txt of dir, sorted by name.
func LoadScenarios(dir string) ([]*Scenario, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []*Scenario
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		s, err := ParseScenario(strings.TrimSuffix(filepath.Base(p), ".txt"), string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// ParseScenario parses one scenario file.
func ParseScenario(name, text string) (*Scenario, error) {
	s := &Scenario{Name: name, Duration: 30 * time.Second, Files: map[string]string{}}
	var cur string
	var body strings.Builder
	flush := func() {
		if cur != "" {
			s.Files[cur] = body.String()
		}
		body.Reset()
	}
	var comments []string
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "-- ") && strings.HasSuffix(line, " --") {
			flush()
			cur = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "-- "), " --"))
			continue
		}
		if cur != "" {
			body.WriteString(line + "\n")
			continue
		}
		t := strings.TrimSpace(line)
		switch {
		case t == "":
		case strings.HasPrefix(t, "#"):
			comments = append(comments, strings.TrimSpace(strings.TrimPrefix(t, "#")))
		case strings.HasPrefix(t, "duration:"):
			d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(t, "duration:")))
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			s.Duration = d
		case strings.HasPrefix(t, "fast:"):
			v, err := strconv.ParseBool(strings.TrimSpace(strings.TrimPrefix(t, "fast:")))
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			s.Fast = v
		case strings.HasPrefix(t, "step "):
			f := strings.Fields(strings.TrimPrefix(t, "step "))
			if len(f) < 2 {
				return nil, fmt.Errorf("line %d: step wants an offset and an action", i+1)
			}
			at, err := time.ParseDuration(f[0])
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			st := Step{At: at, Action: f[1]}
			switch {
			case st.Action == "remove" && len(f) == 2:
			case st.Action == "apply" && len(f) == 3:
				st.File = f[2]
			default:
				return nil, fmt.Errorf("line %d: step %q: want `apply FILE` or `remove`", i+1, strings.Join(f[1:], " "))
			}
			s.Steps = append(s.Steps, st)
		default:
			return nil, fmt.Errorf("line %d: unknown directive %q", i+1, t)
		}
	}
	flush()
	s.Comment = strings.Join(comments, " ")
	if _, ok := s.Files["pod.yaml"]; !ok {
		return nil, fmt.Errorf("no pod.yaml section")
	}
	if s.Duration > MaxDuration {
		return nil, fmt.Errorf("duration %s is more than %s", s.Duration, MaxDuration)
	}
	for _, st := range s.Steps {
		if st.At >= s.Duration {
			return nil, fmt.Errorf("step at %s is not before the end (%s)", st.At, s.Duration)
		}
		if st.File != "" && s.Files[st.File] == "" {
			return nil, fmt.Errorf("step applies %q: no such section", st.File)
		}
	}
	if !strings.Contains(s.Files["pod.yaml"], "name: "+s.Name+"\n") {
		return nil, fmt.Errorf("pod.yaml must name the pod %q (metadata.name)", s.Name)
	}
	return s, nil
}

// Expand fills the placeholders of a manifest.
func Expand(text string, vars map[string]string) string {
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, k := range keys {
		text = strings.ReplaceAll(text, "$"+k, vars[k])
	}
	return text
}
