// Command nodeconf runs the [NodeConformance] specs of Kubernetes' e2e
// suite (test/e2e/common/node and test/e2e/common/storage of
// k8s.io/kubernetes) on speclet nodes and on kubelet nodes, the oracle, each
// under a control plane of its own (test/cluster), and prints
//
//	node conformance: speclet P of N, kubelet K of N
//
// In -out it writes, per agent: <agent>.txt (one "PASS|FAIL|SKIP <spec>"
// line per spec), <agent>/junit.xml, <agent>/report.json (Ginkgo's),
// <agent>/ginkgo.log and <agent>/logs/; and speclet-failures.txt (each
// failed spec of speclet with its message). With -record it also writes
// kubelet's verdicts to that file (the fast subset of `make test` compares
// speclet with them); only a run of every spec on kubelet records.
//
// Usage (as root): go run ./test/nodeconformance/cmd/nodeconf [-agents speclet,kubelet] [-focus regexp] [-out dir]
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
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nodeconf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home, _ := kubebuild.CacheRoot()
	agents := fs.String("agents", "speclet,kubelet", "agents to run the specs on, in order (speclet, kubelet)")
	focus := fs.String("focus", "", "regexp: run only the selected specs whose full name it matches")
	out := fs.String("out", filepath.Join(home, "nodeconf"), "directory for verdicts, JUnit, Ginkgo reports and logs")
	procs := fs.Int("procs", 5, "parallel Ginkgo processes")
	nodes := fs.Int("nodes", 1, "nodes per agent, each on its own containerd (pods of different nodes cannot reach each other: each containerd has its own bridge and no route to the others)")
	version := fs.String("version", nc.DefaultVersion, "k8s.io/kubernetes version of the suite, the control plane and kubelet")
	record := fs.String("record", "", "file to write kubelet's verdicts to (only when every spec ran on kubelet)")
	specletArgs := fs.String("speclet-args", "", "extra flags for `speclet run`, space-separated")
	doc := fs.String("doc", "", "Markdown file whose results section gets both agents' verdicts (only when every spec ran on both)")
	causesPath := fs.String("causes", "test/nodeconformance/testdata/causes.txt", "known causes of differences, \"<spec>\\t<cause>\" per line, for -doc")
	reportOnly := fs.Bool("report-only", false, "run nothing: read the agents' earlier reports in -out and print, record and write -doc from them")
	timeout := fs.Duration("timeout", 90*time.Minute, "bound on each agent's Ginkgo run")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	say := func(format string, a ...any) { fmt.Fprintf(stderr, "nodeconf: "+format+"\n", a...) }
	if os.Geteuid() != 0 && !*reportOnly {
		say("needs root: it runs containerd, which runs containers")
		return 1
	}
	var list []string
	for _, a := range strings.Split(*agents, ",") {
		a = strings.TrimSpace(a)
		if a != nc.Speclet && a != nc.Kubelet {
			say("-agents: %q: want speclet and/or kubelet", a)
			return 2
		}
		list = append(list, a)
	}
	if *reportOnly {
		return report(list, *out, *focus, *record, *doc, *causesPath, *version, stdout, say)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := harness.EnsurePackages(ctx, stderr); err != nil {
		say("%v", err)
		return 1
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		say("%v", err)
		return 1
	}
	start := time.Now()
	if !nc.BinariesCached(*version) {
		say("building e2e.test, ginkgo and the test images' programs of k8s.io/kubernetes %s (minutes when cold; cached afterwards)", *version)
	}
	bins, err := nc.BuildBinaries(ctx, *version, stderr)
	if err != nil {
		say("build the suite: %v", err)
		return 1
	}
	if _, err := cluster.Binaries(ctx, *version, stderr); err != nil {
		say("build the control plane: %v", err)
		return 1
	}
	o := nc.Options{Bins: bins, Version: *version, Nodes: *nodes, Procs: *procs, Focus: *focus, Timeout: *timeout, Log: stderr}
	if *specletArgs != "" {
		o.SpecletArgs = strings.Fields(*specletArgs)
	}
	tmp, err := os.MkdirTemp("", "speclet-nodeconf-bin-")
	if err != nil {
		say("%v", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	for _, a := range list {
		switch a {
		case nc.Speclet:
			if o.SpecletBin, err = cluster.BuildSpeclet(tmp); err != nil {
				say("%v", err)
				return 1
			}
		case nc.Kubelet:
			dir, err := kubebuild.Build(ctx, kubebuild.Options{Set: "kubelet", Version: *version, Commands: []string{"kubelet"}, Log: stderr})
			if err != nil {
				say("build kubelet: %v", err)
				return 1
			}
			o.KubeletBin = filepath.Join(dir, "kubelet")
		}
	}
	reg, err := harness.StartRegistry("127.0.0.1:0")
	if err != nil {
		say("%v", err)
		return 1
	}
	defer reg.Close()
	if err := nc.PushImages(ctx, reg, bins); err != nil {
		say("%v", err)
		return 1
	}
	say("binaries and images ready in %s (registry %s)", time.Since(start).Round(time.Second), reg.Addr)

	results := map[string]*nc.Result{}
	failed := false
	for _, a := range list {
		ao := o
		ao.Agent, ao.Out, ao.Registry = a, filepath.Join(*out, a), reg
		say("%s: starting the control plane and %d %s nodes", a, *nodes, a)
		r, err := nc.Run(ctx, ao)
		if err != nil {
			say("%v", err)
			failed = true
			if r == nil {
				continue
			}
		}
		if *focus == "" {
			r.Specs = nc.WithSkips(r.Specs)
		}
		results[a] = r
		if err := nc.WriteVerdicts(filepath.Join(*out, a+".txt"), r.Specs); err != nil {
			say("%v", err)
			return 1
		}
		if a == nc.Speclet {
			if err := nc.WriteFailures(filepath.Join(*out, "speclet-failures.txt"), r.Specs); err != nil {
				say("%v", err)
				return 1
			}
		}
		say("%s: %d passed, %d failed, %d skipped of %d in %s; verdicts %s, JUnit %s", a, r.Passed(), nc.Count(r.Specs, nc.Fail), nc.Count(r.Specs, nc.Skip),
			len(r.Specs), r.Elapsed.Round(time.Second), filepath.Join(*out, a+".txt"), r.JUnit)
		if a == nc.Kubelet && *record != "" {
			if *focus != "" {
				say("-record: not recording kubelet's verdicts of a focused run")
			} else if err := nc.WriteVerdicts(*record, r.Specs); err != nil {
				say("%v", err)
				return 1
			} else {
				say("recorded kubelet's verdicts in %s", *record)
			}
		}
	}
	var parts []string
	for _, a := range list {
		if r := results[a]; r != nil {
			parts = append(parts, fmt.Sprintf("%s %d of %d", a, r.Passed(), len(r.Specs)))
		} else {
			parts = append(parts, a+" did not run")
		}
	}
	fmt.Fprintf(stdout, "node conformance: %s\n", strings.Join(parts, ", "))
	if s, k := results[nc.Speclet], results[nc.Kubelet]; s != nil && k != nil {
		diff := nc.Differences(s.Specs, k.Specs)
		for _, d := range diff {
			fmt.Fprintln(stdout, "  "+d)
		}
	}
	if s, k := results[nc.Speclet], results[nc.Kubelet]; *doc != "" && s != nil && k != nil && *focus == "" {
		causes, err := nc.ReadCauses(*causesPath)
		if err != nil {
			say("%v", err)
			return 1
		}
		when := fmt.Sprintf("%s (k8s.io/kubernetes %s, %d nodes per agent, %d Ginkgo processes)", start.UTC().Format("2006-01-02 15:04 UTC"), *version, *nodes, *procs)
		if err := nc.UpdateDoc(*doc, nc.Table(s.Specs, k.Specs, causes, when)); err != nil {
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

// report prints, records and documents the results of earlier runs in out.
func report(agents []string, out, focus, record, doc, causesPath, version string, stdout io.Writer, say func(string, ...any)) int {
	results := map[string]*nc.Result{}
	var parts []string
	for _, a := range agents {
		r, err := nc.ReadResult(a, filepath.Join(out, a))
		if err != nil {
			say("%v", err)
			if r == nil {
				return 1
			}
		}
		if focus == "" {
			r.Specs = nc.WithSkips(r.Specs)
		}
		results[a] = r
		parts = append(parts, fmt.Sprintf("%s %d of %d", a, r.Passed(), len(r.Specs)))
	}
	fmt.Fprintf(stdout, "node conformance: %s\n", strings.Join(parts, ", "))
	s, k := results[nc.Speclet], results[nc.Kubelet]
	if s != nil && k != nil {
		for _, d := range nc.Differences(s.Specs, k.Specs) {
			fmt.Fprintln(stdout, "  "+d)
		}
	}
	if k != nil && record != "" && focus == "" {
		if err := nc.WriteVerdicts(record, k.Specs); err != nil {
			say("%v", err)
			return 1
		}
	}
	if s != nil && k != nil && doc != "" && focus == "" {
		causes, err := nc.ReadCauses(causesPath)
		if err != nil {
			say("%v", err)
			return 1
		}
		when := fmt.Sprintf("earlier reports (k8s.io/kubernetes %s", version)
		for _, a := range []string{nc.Speclet, nc.Kubelet} {
			if st, err := os.Stat(filepath.Join(out, a, "report.json")); err == nil {
				when += fmt.Sprintf(", %s's of %s", a, st.ModTime().UTC().Format("2006-01-02 15:04 UTC"))
			}
		}
		when += ")"
		if err := nc.UpdateDoc(doc, nc.Table(s.Specs, k.Specs, causes, when)); err != nil {
			say("%v", err)
			return 1
		}
	}
	return 0
}
