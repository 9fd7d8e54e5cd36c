package nodeconformance

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

func TestReadReport(t *testing.T) {
	tests := []struct {
		name     string
		report   string
		want     []string // "VERDICT name | message"
		suiteErr bool
	}{
		{
			name: "passed, failed, skipped by Skip, filtered out",
			report: `[{"SpecReports":[` +
				`{"ContainerHierarchyTexts":["[sig-node] Pods"],"LeafNodeType":"It","LeafNodeText":"b [NodeConformance]","State":"failed","Failure":{"Message":"boom\nmore","Location":{"FileName":"f.go","LineNumber":7}}},` +
				`{"ContainerHierarchyTexts":["[sig-node] Pods"],"LeafNodeType":"It","LeafNodeText":"a [NodeConformance]","State":"passed"},` +
				`{"ContainerHierarchyTexts":["[sig-node] X"],"LeafNodeType":"It","LeafNodeText":"c","State":"skipped","Failure":{"Message":"no GPU"}},` +
				`{"ContainerHierarchyTexts":["[sig-apps] Y"],"LeafNodeType":"It","LeafNodeText":"d","State":"skipped"}` +
				`]}]`,
			want: []string{"FAIL [sig-node] Pods b [NodeConformance] | boom\nmore", "PASS [sig-node] Pods a [NodeConformance] | ", "SKIP [sig-node] X c | no GPU"},
		},
		{
			name:   "timed out and panicked are failures",
			report: `[{"SpecReports":[{"ContainerHierarchyTexts":["A"],"LeafNodeType":"It","LeafNodeText":"t","State":"timedout"},{"ContainerHierarchyTexts":["A"],"LeafNodeType":"It","LeafNodeText":"p","State":"panicked","Failure":{"Message":"x","ForwardedPanic":"nil map"}}]}]`,
			want:   []string{"FAIL A p | x\npanic: nil map", "FAIL A t | timedout"},
		},
		{
			name:     "a failed suite node is a suite error",
			report:   `[{"SpecialSuiteFailureReasons":["Interrupted by Timeout"],"SpecReports":[{"LeafNodeType":"SynchronizedBeforeSuite","State":"failed","Failure":{"Message":"nodes not ready"}}]}]`,
			suiteErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "report.json")
			if err := os.WriteFile(p, []byte(tt.report), 0o644); err != nil {
				t.Fatal(err)
			}
			specs, suiteErr, err := readReport(p)
			if err != nil {
				t.Fatal(err)
			}
			if (suiteErr != nil) != tt.suiteErr {
				t.Fatalf("suite error %v, want one: %v", suiteErr, tt.suiteErr)
			}
			var got []string
			for _, s := range specs {
				got = append(got, string(s.Verdict)+" "+s.Name+" | "+s.Message)
			}
			want := append([]string(nil), tt.want...)
			sort.Strings(want)
			sort.Strings(got)
			if strings.Join(got, "\n--\n") != strings.Join(want, "\n--\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n--\n"), strings.Join(want, "\n--\n"))
			}
		})
	}
}

func TestVerdictsRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    map[string]Verdict
		wantErr bool
	}{
		{"three verdicts", "PASS a b c\nFAIL d\n# note\n\nSKIP e [x]\n", map[string]Verdict{"a b c": Pass, "d": Fail, "e [x]": Skip}, false},
		{"unknown verdict", "OK a\n", nil, true},
		{"no name", "PASS\n", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "v.txt")
			os.WriteFile(p, []byte(tt.content), 0o644)
			got, err := ReadVerdicts(p)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error: %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%q: got %s, want %s", k, got[k], v)
				}
			}
			// What WriteVerdicts writes, ReadVerdicts reads back.
			var specs []Spec
			for k, v := range got {
				specs = append(specs, Spec{Name: k, Verdict: v})
			}
			p2 := filepath.Join(t.TempDir(), "w.txt")
			if err := WriteVerdicts(p2, specs); err != nil {
				t.Fatal(err)
			}
			back, err := ReadVerdicts(p2)
			if err != nil || len(back) != len(got) {
				t.Fatalf("round trip: %v, %v", back, err)
			}
		})
	}
}

func TestDifferences(t *testing.T) {
	tests := []struct {
		name             string
		speclet, kubelet []Spec
		want             []string
	}{
		{"same", []Spec{{Name: "a", Verdict: Pass}}, []Spec{{Name: "a", Verdict: Pass}}, nil},
		{"worse first, then better",
			[]Spec{{Name: "a", Verdict: Pass}, {Name: "b", Verdict: Fail}, {Name: "c", Verdict: Skip}},
			[]Spec{{Name: "a", Verdict: Fail}, {Name: "b", Verdict: Pass}, {Name: "c", Verdict: Skip}},
			[]string{"speclet FAIL, kubelet PASS: b", "speclet PASS, kubelet FAIL: a"}},
		{"spec only one agent ran", []Spec{{Name: "x", Verdict: Fail}}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Differences(tt.speclet, tt.kubelet)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRepoList(t *testing.T) {
	list := RepoList("127.0.0.1:5000")
	tests := []struct{ key, want string }{
		{"promoterE2eRegistry", "127.0.0.1:5000/e2e-test-images"},
		{"gcRegistry", "127.0.0.1:5000/k8s"},
		{"invalidRegistry", InvalidRegistry},
		{"privateRegistry", "127.0.0.1:5000/private"},
	}
	for _, tt := range tests {
		if !strings.Contains(list, tt.key+": "+tt.want+"\n") {
			t.Errorf("repo list lacks %s: %s:\n%s", tt.key, tt.want, list)
		}
	}
	// Every registry the list names is on loopback.
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		_, v, _ := strings.Cut(line, ": ")
		if !strings.HasPrefix(v, "127.0.0.1:") {
			t.Errorf("%q leaves the machine", line)
		}
	}
}

func TestExcluded(t *testing.T) {
	re := regexp.MustCompile(excluded())
	tests := []struct {
		spec string
		skip bool
	}{
		{"[sig-node] Pods should be updated [NodeConformance] [Conformance]", false},
		{"[sig-node] X [Serial] y", true},
		{"[sig-node] X [Disruptive] y", true},
		{"[sig-node] X y [Flaky]", true},
	}
	if len(Skips) > 0 { // a longer name that contains a skipped one is run
		tests = append(tests, struct {
			spec string
			skip bool
		}{Skips[0].Spec + " more", false})
	}
	for _, s := range Skips {
		tests = append(tests, struct {
			spec string
			skip bool
		}{s.Spec, true})
	}
	for _, tt := range tests {
		// What Ginkgo matches: the suite's description, a space, the name.
		if got := re.MatchString("Kubernetes e2e suite " + tt.spec); got != tt.skip {
			t.Errorf("%q: skipped %v, want %v", tt.spec, got, tt.skip)
		}
	}
}

func TestWithSkips(t *testing.T) {
	if len(Skips) == 0 {
		t.Skip("no skips")
	}
	tests := []struct {
		name  string
		specs []Spec
		want  int // specs in the result
	}{
		{"skips are added", []Spec{{Name: "a", Verdict: Pass}}, 1 + len(Skips)},
		{"a skipped spec's verdict is replaced", []Spec{{Name: Skips[0].Spec, Verdict: Fail}}, len(Skips)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := WithSkips(tt.specs)
			if len(got) != tt.want {
				t.Fatalf("got %d specs, want %d", len(got), tt.want)
			}
			for _, s := range got {
				if r, ok := skipReason(s.Name); ok && (s.Verdict != Skip || s.Message != r) {
					t.Errorf("%s: %s %q, want SKIP with its reason", s.Name, s.Verdict, s.Message)
				}
			}
		})
	}
}

func TestPatternCause(t *testing.T) {
	causes := map[string]string{"re:failed to get logs": "logs", "re:^Timed out": "timeout", "exact name": "x"}
	tests := []struct{ msg, want string }{
		{"failed to get logs from p for c: 404", "logs"},
		{"Timed out after 300s", "timeout"},
		{"something else", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := patternCause(causes, tt.msg); got != tt.want {
			t.Errorf("%q: got %q, want %q", tt.msg, got, tt.want)
		}
	}
}
