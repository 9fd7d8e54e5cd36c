package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/speclet/speclet/gen"
	"github.com/speclet/speclet/spec"
	"github.com/speclet/speclet/verify"
)

func init() { register("spec", "check and draw the lifecycle spec", specMain) }

const specUsage = `usage:
  speclet spec check [FILE...]      validate spec files (default: the built-in spec)
  speclet spec verify [-k N] [FILE...]
                                    explore every reachable state of a pod with 1..N
                                    containers (default 3) and check the invariants of
                                    system.hcl (default: the built-in spec)
  speclet spec graph --machine NAME [--format dot|mermaid|svg] [--spec DIR]
                                    draw a machine (default: the built-in spec)
`

func specMain(args []string) int { return runSpec(args, os.Stdout, os.Stderr) }

// runSpec runs `speclet spec ...` and returns the exit status: 0 on success,
// 1 when the spec has errors, drawing failed or an invariant is violated, 2
// on bad usage (and, for verify, a spec that does not decode).
func runSpec(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, specUsage)
		return 2
	}
	switch args[0] {
	case "check":
		return specCheck(args[1:], stdout, stderr)
	case "graph":
		return specGraph(args[1:], stdout, stderr)
	case "verify":
		return specVerify(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, specUsage)
		return 0
	}
	fmt.Fprintf(stderr, "speclet spec: unknown subcommand %q\n%s", args[0], specUsage)
	return 2
}

// specCheck validates the files named in args as one spec (all machines
// and routes together), prints every diagnostic with its source snippet,
// and a one-line summary when there is no error.
func specCheck(args []string, stdout, stderr io.Writer) int {
	files := spec.Embedded()
	if len(args) > 0 {
		var err error
		if files, err = spec.ReadFiles(args...); err != nil {
			fmt.Fprintf(stderr, "speclet spec check: %v\n", err)
			return 1
		}
	}
	s, diags := spec.Parse(files)
	if len(diags) > 0 {
		if err := s.WriteDiagnostics(stderr, diags); err != nil {
			fmt.Fprintf(stderr, "speclet spec check: print diagnostics: %v\n", err)
		}
	}
	if diags.HasErrors() {
		fmt.Fprintf(stderr, "speclet spec check: %d error(s)\n", countErrors(diags))
		return 1
	}
	var parts []string
	for _, m := range s.Machines {
		n := 0
		for _, st := range m.States {
			n += len(st.Transitions)
		}
		parts = append(parts, fmt.Sprintf("%s: %d states, %d transitions", m.Name, len(m.States), n))
	}
	fmt.Fprintf(stdout, "spec ok: %d file(s), %d machine(s) (%s), %d input(s), %d warning(s)\n",
		len(files), len(s.Machines), strings.Join(parts, "; "), len(s.Inputs), len(diags))
	return 0
}

func countErrors(diags interface{ Errs() []error }) int { return len(diags.Errs()) }

// specGraph prints one machine as DOT, Mermaid or SVG (drawn in Go, no
// Graphviz needed).
func specGraph(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("speclet spec graph", flag.ContinueOnError)
	fs.SetOutput(stderr)
	machine := fs.String("machine", "", "machine to draw (e.g. pod, container)")
	format := fs.String("format", "dot", "output format: dot, mermaid or svg")
	dir := fs.String("spec", "", "directory of spec *.hcl files (default: the built-in spec)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "speclet spec graph: unexpected argument %q\n%s", fs.Arg(0), specUsage)
		return 2
	}
	files := spec.Embedded()
	if *dir != "" {
		var err error
		if files, err = spec.ReadDir(*dir); err != nil {
			fmt.Fprintf(stderr, "speclet spec graph: %v\n", err)
			return 1
		}
	}
	s, diags := spec.Parse(files)
	if diags.HasErrors() {
		_ = s.WriteDiagnostics(stderr, diags)
		fmt.Fprintf(stderr, "speclet spec graph: the spec has %d error(s); run `speclet spec check` on it\n", countErrors(diags))
		return 1
	}
	var names []string
	for _, m := range s.Machines {
		names = append(names, m.Name)
	}
	if *machine == "" {
		fmt.Fprintf(stderr, "speclet spec graph: --machine is required (one of: %s)\n", strings.Join(names, ", "))
		return 2
	}
	m := s.Machine(*machine)
	if m == nil {
		fmt.Fprintf(stderr, "speclet spec graph: no machine %q in the spec (machines: %s)\n", *machine, strings.Join(names, ", "))
		return 1
	}
	var out []byte
	switch *format {
	case "dot":
		out = gen.DOT(m)
	case "mermaid":
		out = gen.Mermaid(m)
	case "svg":
		out = gen.SVG(m, nil) // drawn in Go, as the daemon's /spec/graph draws it
	default:
		fmt.Fprintf(stderr, "speclet spec graph: unknown --format %q (want dot, mermaid or svg)\n", *format)
		return 2
	}
	if _, err := stdout.Write(out); err != nil {
		fmt.Fprintf(stderr, "speclet spec graph: write: %v\n", err)
		return 1
	}
	return 0
}

// specVerify explores the spec named by the files in args (default: the
// built-in spec) for 1..k containers and checks its invariants. Exit status:
// 0 when every invariant holds, 1 on a violation (with its trace), 2 on bad
// usage or a spec with errors.
func specVerify(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("speclet spec verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	k := fs.Int("k", 3, "explore pods with 1..`N` containers")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// The product grows about twentyfold per container: K=4 takes seconds
	// and 400 MB, K=5 would not fit a small machine.
	if *k < 1 || *k > 4 {
		fmt.Fprintf(stderr, "speclet spec verify: -k must be between 1 and 4, not %d\n", *k)
		return 2
	}
	files := spec.Embedded()
	if fs.NArg() > 0 {
		var err error
		if files, err = spec.ReadFiles(fs.Args()...); err != nil {
			fmt.Fprintf(stderr, "speclet spec verify: %v\n", err)
			return 2
		}
	}
	s, diags := spec.Parse(files)
	if diags.HasErrors() {
		_ = s.WriteDiagnostics(stderr, diags)
		fmt.Fprintf(stderr, "speclet spec verify: the spec has %d error(s); run `speclet spec check` on it\n", countErrors(diags))
		return 2
	}
	if len(s.System.Invariants) == 0 {
		fmt.Fprintln(stderr, "speclet spec verify: the spec declares no invariant (see spec/system.hcl)")
		return 2
	}
	rep, err := verify.Check(s, verify.Options{MaxContainers: *k})
	if err != nil {
		fmt.Fprintf(stderr, "speclet spec verify: %v\n", err)
		return 2
	}
	writeVerifyReport(stdout, rep)
	if !rep.OK() {
		return 1
	}
	return 0
}

func writeVerifyReport(w io.Writer, rep *verify.Report) {
	for _, r := range rep.Runs {
		fmt.Fprintf(w, "K=%d: %d role assignment(s), %d states (%d between inputs), %d transitions, %s\n",
			r.K, r.Assignments, r.States, r.Resting, r.Transitions, r.Elapsed.Round(time.Millisecond))
	}
	for _, r := range rep.Apart {
		fmt.Fprintf(w, "apart (%s): %d states (%d between inputs), %d transitions, %s\n",
			strings.Join(r.Machines, ", "), r.States, r.Resting, r.Transitions, r.Elapsed.Round(time.Millisecond))
	}
	for _, r := range rep.Names {
		fmt.Fprintf(w, "name model, %d pods of one static full name: %d states, %d transitions, %s\n",
			r.K, r.States, r.Transitions, r.Elapsed.Round(time.Millisecond))
	}
	for _, ev := range rep.Unproduced {
		fmt.Fprintf(w, "note: event %s never happens: no input, external, timer, send or report of system.hcl produces it\n", ev)
	}
	bad := 0
	for _, iv := range rep.Invariants {
		if iv.Violation == nil {
			fmt.Fprintf(w, "invariant %s (%s): holds (%d checks)\n", iv.Name, iv.Kind, iv.Checks)
			for _, k := range iv.Kept {
				fmt.Fprintf(w, "  the status keeps a terminal phase (phase keeps_terminal), needed with %d container(s) (roles: %s):\n", k.K, strings.Join(k.Roles, ", "))
				for i, l := range k.Trace {
					fmt.Fprintf(w, "  %3d. %s\n", i+1, l)
				}
				fmt.Fprintf(w, "  => %s\n", k.Detail)
			}
			continue
		}
		bad++
		v := iv.Violation
		fmt.Fprintf(w, "invariant %s (%s): VIOLATED with %d container(s) (roles: %s)\n", iv.Name, iv.Kind, v.K, strings.Join(v.Roles, ", "))
		if iv.Doc != "" {
			fmt.Fprintf(w, "  %s\n", iv.Doc)
		}
		for i, l := range v.Trace {
			fmt.Fprintf(w, "  %3d. %s\n", i+1, l)
		}
		if v.Detail != "" {
			fmt.Fprintf(w, "  => %s\n", v.Detail)
		}
	}
	if bad == 0 {
		fmt.Fprintf(w, "verify ok: %d invariant(s) hold; %d states explored in %s\n", len(rep.Invariants), rep.States, rep.Elapsed.Round(time.Millisecond))
		return
	}
	fmt.Fprintf(w, "verify FAILED: %d of %d invariant(s) violated; %d states explored in %s\n", bad, len(rep.Invariants), rep.States, rep.Elapsed.Round(time.Millisecond))
}
