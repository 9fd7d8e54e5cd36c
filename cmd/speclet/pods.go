package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/speclet/speclet/engine"
)

// `speclet pods` and `speclet pod NAME|UID` read a running daemon's
// /debug/pods from its read-only port, like crictl against a runtime.

func init() {
	register("pods", "list the node's pods and the state of each of their machines (from a running daemon)", func(args []string) int {
		return runPods(args, os.Stdout, os.Stderr)
	})
	register("pod", "show one pod's machines and their transition history (from a running daemon)", func(args []string) int {
		return runPod(args, os.Stdout, os.Stderr)
	})
}

type debugClient struct {
	server string
	http   *http.Client
}

func debugFlags(name string, stderr io.Writer) (*flag.FlagSet, *string, *bool, *time.Duration) {
	fs := flag.NewFlagSet("speclet "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "http://127.0.0.1:10255", "the daemon's read-only endpoint")
	watch := fs.Bool("watch", false, "keep printing every --interval")
	interval := fs.Duration("interval", 2*time.Second, "refresh period with --watch")
	return fs, server, watch, interval
}

func (c debugClient) get(path string, v any) error {
	resp, err := c.http.Get(strings.TrimRight(c.server, "/") + path)
	if err != nil {
		return fmt.Errorf("ask the daemon at %s: %w", c.server, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// repeat runs print once, or every interval with watch, until it fails.
func repeat(watch bool, interval time.Duration, stdout, stderr io.Writer, print func(io.Writer) error) int {
	for {
		if watch {
			fmt.Fprint(stdout, "\033[H\033[2J") // clear the terminal
		}
		if err := print(stdout); err != nil {
			fmt.Fprintln(stderr, "speclet:", err)
			return 1
		}
		if !watch {
			return 0
		}
		time.Sleep(interval)
	}
}

func runPods(args []string, stdout, stderr io.Writer) int {
	fs, server, watch, interval := debugFlags("pods", stderr)
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: speclet pods [--server URL] [--watch]")
		return 2
	}
	c := debugClient{server: *server, http: &http.Client{Timeout: 10 * time.Second}}
	return repeat(*watch, *interval, stdout, stderr, func(out io.Writer) error {
		var pods []engine.PodDebug
		if err := c.get("/debug/pods", &pods); err != nil {
			return err
		}
		printPods(out, pods, time.Now())
		return nil
	})
}

func printPods(out io.Writer, pods []engine.PodDebug, now time.Time) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "POD\tUID\tPHASE\tPOD MACHINE\tSANDBOX\tCONTAINERS\tPROBES")
	for _, p := range pods {
		var pod, sandbox string
		var ctrs, probes []string
		for _, m := range p.Machines {
			s := m.State + " " + age(now.Sub(m.Since))
			switch m.Machine {
			case "pod":
				pod = s
			case "sandbox":
				sandbox = s
			case "probe":
				probes = append(probes, m.Instance+"="+s)
			default:
				ctrs = append(ctrs, m.Instance+"="+s)
			}
		}
		phase := p.Phase
		if p.Gone {
			phase += " (gone)"
		}
		fmt.Fprintf(w, "%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, short(string(p.UID)), phase, pod, sandbox,
			strings.Join(ctrs, ", "), strings.Join(probes, ", "))
	}
	w.Flush()
}

func runPod(args []string, stdout, stderr io.Writer) int {
	fs, server, watch, interval := debugFlags("pod", stderr)
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: speclet pod [--server URL] [--watch] NAME|NAMESPACE/NAME|UID")
		return 2
	}
	c := debugClient{server: *server, http: &http.Client{Timeout: 10 * time.Second}}
	key := fs.Arg(0)
	return repeat(*watch, *interval, stdout, stderr, func(out io.Writer) error {
		var p engine.PodDebug
		if err := c.get("/debug/pods/"+url.PathEscape(key), &p); err != nil {
			return err
		}
		if p.UID == "" {
			return errors.New("no pod " + key)
		}
		printPod(out, p, time.Now())
		return nil
	})
}

func printPod(out io.Writer, p engine.PodDebug, now time.Time) {
	gone := ""
	if p.Gone {
		gone = " (gone from the node; history kept for a while)"
	}
	fmt.Fprintf(out, "pod %s/%s uid %s phase %s%s\n\n", p.Namespace, p.Name, p.UID, p.Phase, gone)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MACHINE\tSTATE\tFOR")
	for _, m := range p.Machines {
		name := m.Machine
		if m.Instance != "" {
			name += "/" + m.Instance
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", name, m.State, age(now.Sub(m.Since)))
	}
	w.Flush()
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TIME\tMACHINE\tFROM\tEVENT\t[GUARD]\tTO\tACTIONS")
	for _, t := range p.History {
		name := t.Machine
		if t.Instance != "" {
			name += "/" + t.Instance
		}
		guard := ""
		if t.Guard != "" {
			guard = "[" + t.Guard + "]"
		}
		to := t.To
		if len(t.Choices) > 0 {
			to += " (via " + strings.Join(t.Choices, ", ") + ")"
		}
		var acts []string
		for _, a := range t.Actions {
			s := a.Action
			if a.Error != "" {
				s += " (error: " + a.Error + ")"
			}
			acts = append(acts, s)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Time.Format("15:04:05.000"), name, t.From, t.Event, guard, to, strings.Join(acts, ", "))
	}
	w.Flush()
}

func short(uid string) string {
	if len(uid) > 8 {
		return uid[:8]
	}
	return uid
}

// age renders a duration like kubectl: 45s, 3m, 2h.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%dh", int(d.Hours()))
}
