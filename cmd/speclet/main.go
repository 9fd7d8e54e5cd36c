// Command speclet is the node agent and its tools.
//
// Usage:
//
//	speclet run [flags]                         run the node agent
//	speclet spec check FILE...                  validate lifecycle spec files
//	speclet spec verify [-k N] [FILE...]        check the spec's invariants over every reachable state
//	speclet spec graph --machine NAME --format dot|mermaid|svg
//	speclet version
//
// Each subcommand lives in its own file and registers itself in commands.
package main

import (
	"fmt"
	"os"
	"sort"
)

// command runs a subcommand with the arguments after its name and returns the
// process exit status.
type command struct {
	summary string
	run     func(args []string) int
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string) int) {
	if _, dup := commands[name]; dup {
		panic("speclet: command registered twice: " + name)
	}
	commands[name] = command{summary: summary, run: run}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: speclet COMMAND [ARGS]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "speclet: unknown command %q\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	os.Exit(c.run(os.Args[2:]))
}
