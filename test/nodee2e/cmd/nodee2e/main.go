// Command nodee2e runs the [NodeConformance] specs of Kubernetes' node e2e
// suite (e2e_node.test of k8s.io/kubernetes) on a speclet node and on a
// kubelet node, the oracle, each joined to a control plane of its own
// (test/cluster): first the specs that may run in parallel, then the
// [Serial] ones, one at a time. It prints
//
//	node e2e: speclet P of N, kubelet K of N
//
// In -out it writes, per agent: <agent>.txt (one "PASS|FAIL|SKIP <spec>"
// line per spec, both passes), <agent>/ and <agent>-serial/ (junit.xml,
// report.json, ginkgo.log and logs/ of each pass); and
// speclet-failures.txt. With -record it writes kubelet's verdicts there
// (the fast subset of `make test` compares speclet with them), with -doc
// the results section of that Markdown file; neither for a focused run,
// but -record -merge merges a focused run's kubelet verdicts into the file.
//
// Usage (as root): go run ./test/nodee2e/cmd/nodee2e [-agents speclet,kubelet] [-focus regexp] [-out dir]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/speclet/speclet/cri/harness"
	"github.com/speclet/speclet/test/cluster"
	"github.com/speclet/speclet/test/kubebuild"
	nc "github.com/speclet/speclet/test/nodeconformance"
	"github.com/speclet/speclet/test/nodee2e"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// pass is one of the two selections.
type pass struct {
	name   string
	serial bool
}

var passes = []pass{{"parallel", false}, {"serial", true}}

func (p pass) dir(out, agent string) string {
	if p.serial {
		return filepath.Join(out, agent+"-serial")
	}
	return filepath.Join(out, agent)
}

func (p pass) selects(name string) bool { return nodee2e.IsSerial(name) == p.serial }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nodee2e", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home, _ := kubebuild.CacheRoot()
	agents := fs.String("agents", "speclet,kubelet", "agents to run the specs on, in order (speclet, kubelet)")
	focus := fs.String("focus", "", "regexp: run only the selected specs whose full name it matches")
	focusFile := fs.String("focus-file", "", "regexp: run only the selected specs of the files it matches (test/e2e_node/: the suite's own specs)")
	out := fs.String("out", filepath.Join(home, "nodee2e"), "directory for verdicts, JUnit, Ginkgo reports and logs")
	procs := fs.Int("procs", 4, "parallel Ginkgo processes of the parallel pass")
	passList := fs.String("passes", "parallel,serial", "passes to run: parallel (the specs without [Serial]) and/or serial")
	version := fs.String("version", nc.DefaultVersion, "k8s.io/kubernetes version of the suite, the control plane and kubelet")
	record := fs.String("record", "", "file to write kubelet's verdicts to (only when every spec of both passes ran on kubelet)")
	merge := fs.Bool("merge", false, "with -record: on a focused or one-pass run, merge the verdicts of the specs that ran on kubelet into the file (theirs replaced, every other line kept)")
	doc := fs.String("doc", "", "Markdown file whose results section gets both agents' verdicts (only when every spec ran on both)")
	causesPath := fs.String("causes", "test/nodee2e/testdata/causes.txt", "known causes of differences, \"<spec>\\t<cause>\" per line, for -doc")
	reportOnly := fs.Bool("report-only", false, "run nothing: read the agents' earlier reports in -out and print, record and write -doc from them")
	timeout := fs.Duration("timeout", 90*time.Minute, "bound on each Ginkgo run")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "node-e2e: "+format+"\n", a...) }
	var list []string
	for _, a := range strings.Split(*agents, ",") {
		a = strings.TrimSpace(a)
		if a != nodee2e.Speclet && a != nodee2e.Kubelet {
			say("-agents: %q: want speclet and/or kubelet", a)
			return 2
		}
		list = append(list, a)
	}
	var selected []pass
	for _, p := range strings.Split(*passList, ",") {
		switch strings.TrimSpace(p) {
		case "parallel":
			selected = append(selected, passes[0])
		case "serial":
			selected = append(selected, passes[1])
		default:
			say("-passes: %q: want parallel and/or serial", p)
			return 2
		}
	}
	complete := *focus == "" && *focusFile == "" && len(selected) == len(passes)
	if os.Geteuid() != 0 && !*reportOnly {
		say("needs root: it runs containerd, the node agent and e2e_node.test, which writes static pods and reads the node's files")
		return 1
	}
	start := time.Now()
	results := map[string][]nc.Spec{}
	failed := false
	if *reportOnly {
		for _, a := range list {
			for _, p := range selected {
				r, err := nc.ReadResult(a, p.dir(*out, a))
				if err != nil {
					say("%v", err)
					if r == nil {
						return 1
					}
				}
				results[a] = append(results[a], withSkips(r.Specs, p, *focus+*focusFile)...)
			}
		}
	} else {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		o, cleanup, err := prepare(ctx, list, *version, stderr, say)
		if err != nil {
			say("%v", err)
			return 1
		}
		defer cleanup()
		o.Focus, o.FocusFile, o.Timeout = *focus, *focusFile, *timeout
		for _, p := range selected {
			for _, a := range list {
				if ctx.Err() != nil {
					break
				}
				ao := o
				ao.Agent, ao.Out, ao.Serial, ao.Procs = a, p.dir(*out, a), p.serial, *procs
				say("%s, %s pass: starting the control plane and the node", a, p.name)
				r, err := nodee2e.Run(ctx, ao)
				if err != nil {
					say("%v", err)
					failed = true
					if r == nil {
						continue
					}
				}
				specs := withSkips(r.Specs, p, *focus+*focusFile)
				results[a] = append(results[a], specs...)
				say("%s, %s pass: %d passed, %d failed, %d skipped of %d in %s; JUnit %s", a, p.name, nc.Count(specs, nc.Pass), nc.Count(specs, nc.Fail),
					nc.Count(specs, nc.Skip), len(specs), r.Elapsed.Round(time.Second), r.JUnit)
			}
		}
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		say("%v", err)
		return 1
	}
	for _, a := range list {
		if specs, ok := results[a]; ok {
			sortSpecs(specs)
			if err := nc.WriteVerdicts(filepath.Join(*out, a+".txt"), specs); err != nil {
				say("%v", err)
				return 1
			}
			if a == nodee2e.Speclet {
				if err := nc.WriteFailures(filepath.Join(*out, "speclet-failures.txt"), specs); err != nil {
					say("%v", err)
					return 1
				}
			}
		}
	}
	var parts []string
	for _, a := range list {
		if specs, ok := results[a]; ok {
			parts = append(parts, fmt.Sprintf("%s %d of %d", a, nc.Count(specs, nc.Pass), len(specs)))
		} else {
			parts = append(parts, a+" did not run")
		}
	}
	fmt.Fprintf(stdout, "node e2e: %s\n", strings.Join(parts, ", "))
	s, sok := results[nodee2e.Speclet]
	k, kok := results[nodee2e.Kubelet]
	if sok && kok {
		for _, d := range nc.Differences(s, k) {
			fmt.Fprintln(stdout, "  "+d)
		}
	}
	if kok && *record != "" {
		if failed {
			say("-record: not recording kubelet's verdicts of a failed run")
		} else if !complete && *merge {
			n, err := mergeVerdicts(*record, k)
			if err != nil {
				say("%v", err)
				return 1
			}
			say("merged kubelet's verdicts of %d specs into %s", n, *record)
		} else if !complete {
			say("-record: not recording kubelet's verdicts of a focused or partial run (-merge merges them)")
		} else if err := nc.WriteVerdicts(*record, k); err != nil {
			say("%v", err)
			return 1
		} else {
			say("recorded kubelet's verdicts in %s", *record)
		}
	}
	if sok && kok && *doc != "" && complete && !failed {
		causes, err := nc.ReadCauses(*causesPath)
		if err != nil {
			say("%v", err)
			return 1
		}
		when := fmt.Sprintf("%s (k8s.io/kubernetes %s, %d Ginkgo processes in the parallel pass, 1 in the serial one)", start.UTC().Format("2006-01-02 15:04 UTC"), *version, *procs)
		if *reportOnly {
			when = fmt.Sprintf("earlier reports (k8s.io/kubernetes %s", *version)
			for _, a := range []string{nodee2e.Speclet, nodee2e.Kubelet} {
				if st, err := os.Stat(filepath.Join(*out, a, "report.json")); err == nil {
					when += fmt.Sprintf(", %s's of %s", a, st.ModTime().UTC().Format("2006-01-02 15:04 UTC"))
				}
			}
			when += ")"
		}
		if err := nodee2e.UpdateDoc(*doc, nodee2e.Table(s, k, causes, when)); err != nil {
			say("%v", err)
			return 1
		}
		say("wrote the results into %s", *doc)
	}
	if failed {
		return 1
	}
	return 0
}

// withSkips adds the skipped specs of pass p to specs, unless the run was
// narrowed (focus: the -focus and -focus-file regexps).
func withSkips(specs []nc.Spec, p pass, focus string) []nc.Spec {
	if focus != "" {
		return specs
	}
	return nodee2e.WithSkips(specs, p.selects)
}

// mergeVerdicts writes the verdicts of specs into the verdicts file path
// (nodeconformance.WriteVerdicts' format): a spec already there gets its
// new verdict, every other line is kept. It returns how many specs it
// wrote.
func mergeVerdicts(path string, specs []nc.Spec) (int, error) {
	old, err := nc.ReadVerdicts(path)
	if err != nil && !os.IsNotExist(err) {
		return 0, fmt.Errorf("-merge: %w", err)
	}
	if old == nil {
		old = map[string]nc.Verdict{}
	}
	for _, s := range specs {
		old[s.Name] = s.Verdict
	}
	all := make([]nc.Spec, 0, len(old))
	for name, v := range old {
		all = append(all, nc.Spec{Name: name, Verdict: v})
	}
	sortSpecs(all)
	if err := nc.WriteVerdicts(path, all); err != nil {
		return 0, fmt.Errorf("-merge: %w", err)
	}
	return len(specs), nil
}

func sortSpecs(specs []nc.Spec) {
	for i := 1; i < len(specs); i++ {
		for j := i; j > 0 && specs[j].Name < specs[j-1].Name; j-- {
			specs[j], specs[j-1] = specs[j-1], specs[j]
		}
	}
}

// prepare builds (or finds) the binaries, starts the registry and pushes
// the images; cleanup stops the registry and removes the built speclet.
func prepare(ctx context.Context, agents []string, version string, stderr io.Writer, say func(string, ...any)) (nodee2e.Options, func(), error) {
	start := time.Now()
	if err := harness.EnsurePackages(ctx, stderr); err != nil {
		return nodee2e.Options{}, nil, err
	}
	if !nc.BinariesCached(version) {
		say("building e2e_node.test, e2e.test, ginkgo and the test images' programs of k8s.io/kubernetes %s (minutes when cold; cached afterwards)", version)
	}
	bins, err := nc.BuildBinaries(ctx, version, stderr)
	if err != nil {
		return nodee2e.Options{}, nil, fmt.Errorf("build the suite: %w", err)
	}
	if _, err := cluster.Binaries(ctx, version, stderr); err != nil {
		return nodee2e.Options{}, nil, fmt.Errorf("build the control plane: %w", err)
	}
	o := nodee2e.Options{Bins: bins, Version: version, Log: stderr}
	tmp, err := os.MkdirTemp("", "speclet-nodee2e-bin-")
	if err != nil {
		return o, nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	for _, a := range agents {
		switch a {
		case nodee2e.Speclet:
			if o.SpecletBin, err = cluster.BuildSpeclet(tmp); err != nil {
				cleanup()
				return o, nil, err
			}
		case nodee2e.Kubelet:
			dir, err := kubebuild.Build(ctx, kubebuild.Options{Set: "kubelet", Version: version, Commands: []string{"kubelet"}, Log: stderr})
			if err != nil {
				cleanup()
				return o, nil, fmt.Errorf("build kubelet: %w", err)
			}
			o.KubeletBin = filepath.Join(dir, "kubelet")
		}
	}
	reg, err := harness.StartRegistry("127.0.0.1:0")
	if err != nil {
		cleanup()
		return o, nil, err
	}
	if err := nc.PushNodeE2EImages(ctx, reg, bins); err != nil {
		reg.Close()
		cleanup()
		return o, nil, err
	}
	o.Registry = reg
	say("binaries and images ready in %s (registry %s)", time.Since(start).Round(time.Second), reg.Addr)
	return o, func() { reg.Close(); cleanup() }, nil
}
