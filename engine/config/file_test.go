package config

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func podYAML(name, cmd string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: main\n    image: busybox:1\n    command: [sh, -c, %q]\n", name, cmd)
}

func names(pods []*v1.Pod) string {
	var s []string
	for _, p := range pods {
		s = append(s, p.Name)
	}
	return strings.Join(s, ",")
}

func errText(errs []error) string {
	var s []string
	for _, e := range errs {
		s = append(s, e.Error())
	}
	return strings.Join(s, "\n")
}

func TestDirScanner(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rm := func(name string) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	sc := newDirScanner(dir, "n1")
	var webUID string
	steps := []struct {
		what    string
		do      func()
		pods    string
		changed bool
		errs    []string // substrings, one per expected problem, in order
		check   func(pods []*v1.Pod)
	}{
		{what: "empty directory", do: func() {}, pods: ""},
		{what: "a YAML and a JSON manifest, a dotfile and a subdirectory", do: func() {
			write("web.yaml", podYAML("web", "sleep 1000"))
			write("job.json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"job"},"spec":{"restartPolicy":"Never","containers":[{"name":"main","image":"busybox:1"}]}}`)
			write(".web.yaml.swp", "garbage")
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			write("sub/other.yaml", podYAML("other", "true"))
		}, pods: "job-n1,web-n1", changed: true, check: func(pods []*v1.Pod) { webUID = string(pods[1].UID) }},
		{what: "nothing changed", do: func() {}, pods: "job-n1,web-n1"},
		{what: "an invalid new manifest is reported and skipped", do: func() {
			write("bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: bad}\nspec: {}\n")
		}, pods: "job-n1,web-n1", changed: true, errs: []string{"bad.yaml: field spec.containers"}},
		{what: "the invalid manifest is reported once", do: func() {}, pods: "job-n1,web-n1"},
		{what: "a valid manifest turning invalid keeps its last valid pod", do: func() {
			write("web.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: web\n")
		}, pods: "job-n1,web-n1", changed: true, errs: []string{"web.yaml: decode", "web.yaml: keeping its last valid pod default/web-n1"},
			check: func(pods []*v1.Pod) {
				if string(pods[1].UID) != webUID {
					t.Errorf("web uid %s, want the last valid %s", pods[1].UID, webUID)
				}
			}},
		{what: "fixing it with an edit replaces the pod", do: func() { write("web.yaml", podYAML("web", "sleep 2000")) },
			pods: "job-n1,web-n1", changed: true, check: func(pods []*v1.Pod) {
				if string(pods[1].UID) == webUID {
					t.Errorf("edited manifest kept uid %s; want a new pod", webUID)
				}
			}},
		{what: "a second manifest with the same pod name is skipped", do: func() { write("web2.yaml", podYAML("web", "sleep 3")) },
			pods: "job-n1,web-n1", changed: true, errs: []string{"web2.yaml: field metadata.name: pod default/web-n1 is already declared by " + filepath.Join(dir, "web.yaml")}},
		{what: "a removed manifest removes its pod; the clash is gone", do: func() { rm("job.json"); rm("web.yaml") },
			pods: "web-n1", changed: true},
		{what: "the directory disappears: no pods", do: func() {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}, pods: "", changed: true, errs: []string{"read manifest directory"}},
	}
	for _, s := range steps {
		s.do()
		pods, changed, problems := sc.scan()
		if got := names(pods); got != s.pods || changed != s.changed {
			t.Errorf("%s: pods %q changed %v, want %q changed %v", s.what, got, changed, s.pods, s.changed)
		}
		got := errText(problems)
		if len(problems) != len(s.errs) {
			t.Errorf("%s: %d problems, want %d:\n%s", s.what, len(problems), len(s.errs), got)
		}
		for i, w := range s.errs {
			if i < len(problems) && !strings.Contains(problems[i].Error(), w) {
				t.Errorf("%s: problem %d %q does not contain %q", s.what, i, problems[i], w)
			}
		}
		if s.check != nil && len(pods) > 0 {
			s.check(pods)
		}
	}
}

// next waits for the next update; waiting is bounded, never asserted on.
func next(t *testing.T, m *Merger) PodUpdate {
	t.Helper()
	select {
	case u := <-m.Updates():
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no update within 10s")
		return PodUpdate{}
	}
}

func TestWatchDir(t *testing.T) {
	for _, period := range []time.Duration{time.Second, time.Hour} {
		// With a one-hour period only inotify can notice the changes.
		t.Run(fmt.Sprint("period=", period), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(podYAML("a", "sleep 1")), 0o644); err != nil {
				t.Fatal(err)
			}
			m := NewMerger(nil)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- WatchDir(ctx, DirSource{Dir: dir, NodeName: "n1", Period: period}, m, nil) }()
			if u := next(t, m); u.Op != OpAdd || names(u.Pods) != "a-n1" || u.Source != SourceFile {
				t.Fatalf("first update %s %q from %s, want ADD a-n1 from file", u.Op, names(u.Pods), u.Source)
			}
			// Written the atomic way: a temporary dotfile renamed into place.
			tmp := filepath.Join(dir, ".b.yaml.tmp")
			if err := os.WriteFile(tmp, []byte(podYAML("b", "sleep 1")), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, "b.yaml")); err != nil {
				t.Fatal(err)
			}
			if u := next(t, m); u.Op != OpAdd || names(u.Pods) != "b-n1" {
				t.Fatalf("after adding b.yaml: %s %q, want ADD b-n1", u.Op, names(u.Pods))
			}
			if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
				t.Fatal(err)
			}
			if u := next(t, m); u.Op != OpRemove || names(u.Pods) != "a-n1" {
				t.Fatalf("after removing a.yaml: %s %q, want REMOVE a-n1", u.Op, names(u.Pods))
			}
			// Removed and written back at once (rm b.yaml; cat > b.yaml):
			// as kubelet's file source sees both events, the pod goes
			// and comes back with its UID, however fast the two were.
			b := filepath.Join(dir, "b.yaml")
			data, err := os.ReadFile(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(b); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(b, data, 0o644); err != nil {
				t.Fatal(err)
			}
			gone, back := next(t, m), next(t, m)
			if gone.Op != OpRemove || names(gone.Pods) != "b-n1" || back.Op != OpAdd || names(back.Pods) != "b-n1" || gone.Pods[0].UID != back.Pods[0].UID {
				t.Fatalf("after rm and rewrite of b.yaml: %s %q then %s %q, want REMOVE b-n1 then ADD b-n1 with its UID", gone.Op, names(gone.Pods), back.Op, names(back.Pods))
			}
			cancel()
			if err := <-done; err != context.Canceled {
				t.Errorf("WatchDir returned %v, want context.Canceled", err)
			}
		})
	}
}

// A name clash between two files is reported when it appears, not on every
// rescan; it is reported again when it comes back after being resolved.
func TestDirScannerReportsClashOnce(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sc := newDirScanner(dir, "n1")
	write("a.yaml", podYAML("web", "sleep 1"))
	write("b.yaml", podYAML("web", "sleep 2"))
	pods, _, problems := sc.scan()
	if names(pods) != "web-n1" || len(problems) != 1 || !strings.Contains(problems[0].Error(), "b.yaml: field metadata.name: pod default/web-n1 is already declared by") {
		t.Fatalf("first scan: pods %q problems %q", names(pods), errText(problems))
	}
	for i := 0; i < 3; i++ {
		if _, _, problems := sc.scan(); len(problems) != 0 {
			t.Fatalf("rescan %d reported again: %q", i, errText(problems))
		}
	}
	write("b.yaml", podYAML("other", "sleep 2"))
	if pods, _, problems := sc.scan(); names(pods) != "web-n1,other-n1" || len(problems) != 0 {
		t.Fatalf("resolved: pods %q problems %q", names(pods), errText(problems))
	}
	write("b.yaml", podYAML("web", "sleep 3"))
	if _, _, problems := sc.scan(); len(problems) != 1 {
		t.Fatalf("clash back: want it reported once more, got %q", errText(problems))
	}
}

// A manifest over 10 MiB is refused with an error naming the file and the
// limit, without being read; the other pods are unaffected.
func TestDirScannerFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(podYAML("web", "sleep 1")), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxManifestBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sc := newDirScanner(dir, "n1")
	pods, _, problems := sc.scan()
	if names(pods) != "web-n1" {
		t.Errorf("pods %q, want web-n1", names(pods))
	}
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), big) || !strings.Contains(problems[0].Error(), "10 MiB") {
		t.Fatalf("problems %q, want one naming %s and the 10 MiB limit", errText(problems), big)
	}
	if _, _, problems := sc.scan(); len(problems) != 0 {
		t.Errorf("rescan reported again: %q", errText(problems))
	}
}

// A rescan does not read a file whose mtime, size and inode are unchanged.
func TestDirScannerSkipsUnchangedFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yaml")
	if err := os.WriteFile(path, []byte(podYAML("web", "sleep 1")), 0o644); err != nil {
		t.Fatal(err)
	}
	sc := newDirScanner(dir, "n1")
	if pods, _, _ := sc.scan(); names(pods) != "web-n1" {
		t.Fatalf("pods %q", names(pods))
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Same size, same inode, same mtime: the scanner must not read it (it
	// would find garbage).
	garbage := strings.Repeat("!", int(info.Size()))
	if err := os.WriteFile(path, []byte(garbage), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	pods, changed, problems := sc.scan()
	if names(pods) != "web-n1" || changed || len(problems) != 0 {
		t.Fatalf("unchanged stat: pods %q changed %v problems %q; the file was read again", names(pods), changed, errText(problems))
	}
	// A new mtime makes it read.
	later := info.ModTime().Add(time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if _, changed, problems := sc.scan(); !changed || len(problems) == 0 {
		t.Fatalf("touched: changed %v problems %q, want the garbage reported", changed, errText(problems))
	}
}

// A scan that finds nothing changed returns the last snapshot itself (no
// sorting, matching or allocating it again), a rewrite with the same content
// included; a change makes a new one.
func TestDirScannerReusesUnchangedSnapshot(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", podYAML("a", "sleep 1"))
	write("b.yaml", podYAML("b", "sleep 1"))
	sc := newDirScanner(dir, "n1")
	first, _, _ := sc.scan()
	if names(first) != "a-n1,b-n1" {
		t.Fatalf("pods %q", names(first))
	}
	write("b.yaml", podYAML("b", "sleep 1")) // same content, new mtime
	for i := range 2 {
		pods, changed, problems := sc.scan()
		if changed || len(problems) != 0 || names(pods) != "a-n1,b-n1" {
			t.Fatalf("rescan %d: pods %q changed %v problems %q", i, names(pods), changed, errText(problems))
		}
		if &pods[0] != &first[0] {
			t.Fatalf("rescan %d made a new snapshot of unchanged files", i)
		}
	}
	write("b.yaml", podYAML("b", "sleep 2"))
	pods, changed, _ := sc.scan()
	if !changed || names(pods) != "a-n1,b-n1" || &pods[0] == &first[0] || pods[1] == first[1] {
		t.Fatalf("after an edit: pods %q changed %v, want a new snapshot with the edited pod", names(pods), changed)
	}
}

// TestDirScannerTrustsKnownFiles: a scan that trusts inotify for the
// regular files it read before (WatchDir's periodic scan with inotify)
// still finds a new file, a removed one and a symlinked manifest whose
// target changed (inotify on the directory does not see the target), and
// leaves an edit of a known regular file to the next full scan, which an
// inotify event of the edit starts.
func TestDirScannerTrustsKnownFiles(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	write := func(path, data string) {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "a.yaml"), podYAML("a", "sleep 1"))
	write(filepath.Join(dir, "b.yaml"), podYAML("b", "sleep 1"))
	target := filepath.Join(elsewhere, "l.yaml")
	write(target, podYAML("l", "sleep 1"))
	if err := os.Symlink(target, filepath.Join(dir, "l.yaml")); err != nil {
		t.Fatal(err)
	}
	sc := newDirScanner(dir, "n1")
	if pods, _, _ := sc.scan(); names(pods) != "a-n1,b-n1,l-n1" {
		t.Fatalf("first scan: pods %q", names(pods))
	}
	cmdOf := func(pods []*v1.Pod, name string) string {
		for _, p := range pods {
			if p.Name == name {
				return strings.Join(p.Spec.Containers[0].Command, " ")
			}
		}
		return ""
	}
	sc.trustKnown = true
	write(filepath.Join(dir, "a.yaml"), podYAML("a", "sleep 2"))
	write(target, podYAML("l", "sleep 2"))
	write(filepath.Join(dir, "c.yaml"), podYAML("c", "sleep 1"))
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	pods, changed, _ := sc.scan()
	if !changed || names(pods) != "a-n1,c-n1,l-n1" {
		t.Fatalf("trusting scan: pods %q changed %v, want b gone and c new", names(pods), changed)
	}
	if got := cmdOf(pods, "l-n1"); got != "sh -c sleep 2" {
		t.Errorf("trusting scan: the symlinked pod runs %q, want its new target's sleep 2", got)
	}
	if got := cmdOf(pods, "a-n1"); got != "sh -c sleep 1" {
		t.Errorf("trusting scan: a runs %q, want the edit left to the full scan", got)
	}
	sc.trustKnown = false
	pods, changed, _ = sc.scan()
	if got := cmdOf(pods, "a-n1"); !changed || got != "sh -c sleep 2" {
		t.Errorf("full scan: a runs %q (changed %v), want its edit", got, changed)
	}
}
