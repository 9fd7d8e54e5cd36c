package gen

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/speclet/speclet/spec"
)

// TestSVG: the Go-drawn graph is well-formed SVG with a box per state, the
// highlighted state marked current, and a taken row drawn with its count;
// without a highlight nothing is marked.
func TestSVG(t *testing.T) {
	s, diags := spec.Parse(spec.Embedded())
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, m := range s.Machines {
		out := SVG(m, nil)
		d := xml.NewDecoder(bytes.NewReader(out))
		states := 0
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: not well-formed: %v", m.Name, err)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "g" {
				states++
			}
		}
		if states != len(m.States) {
			t.Errorf("%s: %d state boxes, want %d", m.Name, states, len(m.States))
		}
		if strings.Contains(string(out), "current") || strings.Contains(string(out), "x)") {
			t.Errorf("%s: marks without a highlight", m.Name)
		}
	}
	c := s.Machine("container")
	out := string(SVG(c, &Highlight{Current: "running", Taken: map[string]int{TakenKey("waiting", "start", ""): 2}}))
	if !strings.Contains(out, `class="state current" id="state-running"`) || !strings.Contains(out, "start (2x)") {
		t.Errorf("highlight missing:\n%.2000s", out)
	}
}
