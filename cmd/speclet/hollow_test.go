package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHollowFlags(t *testing.T) {
	base := []string{"--kubeconfig", "k", "--node-token-file", "t"}
	o, err := parseHollowFlags(append(base, "--nodes", "3", "--pods-per-node-max", "20", "--", "--sync-frequency", "30s"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := o.nodeRunOptions(2)
	if err != nil {
		t.Fatal(err)
	}
	if ro.nodeName != "hollow-2" || ro.runtime != "sim" || ro.maxPods != 20 || ro.port != 0 || ro.readOnlyPort != 0 ||
		ro.syncFrequency.String() != "30s" || ro.rootDir != filepath.Join("/tmp/speclet-hollow", "hollow-2") || ro.kubeconfig != "k" {
		t.Errorf("node 2's run options: %+v", ro)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "1"}, "--kubeconfig: required"},
		{[]string{"--kubeconfig", "k", "--nodes", "1"}, "--node-token-file: required"},
		{append(base, "--nodes", "0"), "--nodes: 0"},
		{append(base, "--pods-per-node-max", "0"), "--pods-per-node-max: 0"},
		{append(base, "--", "--node-name=x"), "--node-name=x: set by speclet hollow"},
		{append(base, "--", "--root-dir", "/x"), "--root-dir: set by speclet hollow"},
	} {
		_, err := parseHollowFlags(c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error containing %q", c.args, err, c.want)
		}
	}
	// a bad run flag names the node
	o, err = parseHollowFlags(append(base, "--", "--sync-frequency", "-1s"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.nodeRunOptions(0); err == nil || !strings.Contains(err.Error(), "node hollow-0: --sync-frequency") {
		t.Errorf("bad run flag: %v", err)
	}
}

func TestReadNodeTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "tokens.csv")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := readNodeTokens(write("# static tokens\nt0,system:node:hollow-0,hollow-0,\"system:nodes\"\nt1,system:node:hollow-1,u1,\"a,system:nodes\"\nta,admin,admin,\"system:masters\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["hollow-0"] != "t0" || got["hollow-1"] != "t1" {
		t.Errorf("tokens: %v", got)
	}
	if _, err := readNodeTokens(write("t0,system:node:hollow-0,hollow-0\n")); err == nil || !strings.Contains(err.Error(), "line 1: user system:node:hollow-0 is not in group system:nodes") {
		t.Errorf("node token without system:nodes: %v", err)
	}
	if _, err := readNodeTokens(write("t0,system:node:hollow-0\n")); err == nil || !strings.Contains(err.Error(), "line 1: want token,user,uid") {
		t.Errorf("short line: %v", err)
	}
	if _, err := readNodeTokens(filepath.Join(dir, "nosuch")); err == nil || !strings.Contains(err.Error(), "--node-token-file") {
		t.Errorf("missing file: %v", err)
	}
}
