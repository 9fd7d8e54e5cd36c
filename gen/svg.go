package gen

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/speclet/speclet/spec"
)

// SVG draws m as a standalone SVG without Graphviz: states are laid out in
// columns by their distance from the initial state (a layered layout, left
// to right), arrows are curves labelled `event [guard] / actions`, internal
// transitions that run actions are loops drawn dashed, choice branches
// dotted. With h, the current state is filled and the rows h took are drawn
// bold with their count. The layout is plain but needs nothing at run time.
func SVG(m *spec.Machine, h *Highlight) []byte {
	const (
		boxW, boxH = 150.0, 34.0
		colGap     = 140.0
		rowGap     = 56.0
		margin     = 30.0
	)
	// Rank: breadth-first distance from the initial state over all edges.
	es := edges(m)
	rank := map[string]int{m.Initial.Name: 0}
	queue := []string{m.Initial.Name}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, e := range es {
			if e.from == s {
				if _, ok := rank[e.to]; !ok {
					rank[e.to] = rank[s] + 1
					queue = append(queue, e.to)
				}
			}
		}
	}
	cols := map[int][]string{}
	maxRank, maxRows := 0, 0
	for _, st := range m.States {
		r, ok := rank[st.Name]
		if !ok {
			r = 0 // unreachable states (the validator rejects them) go first
		}
		cols[r] = append(cols[r], st.Name)
		maxRank = max(maxRank, r)
		maxRows = max(maxRows, len(cols[r]))
	}
	type pt struct{ x, y float64 }
	pos := map[string]pt{}
	height := margin*2 + float64(maxRows)*(boxH+rowGap)
	for r := 0; r <= maxRank; r++ {
		col := cols[r]
		top := (height - float64(len(col))*(boxH+rowGap) + rowGap) / 2
		for i, name := range col {
			pos[name] = pt{margin + 40 + float64(r)*(boxW+colGap), top + float64(i)*(boxH+rowGap)}
		}
	}
	width := margin*2 + 40 + float64(maxRank+1)*(boxW+colGap)

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif">`+"\n",
		width, height, width, height)
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#444"/></marker>` +
		`<marker id="arrow-taken" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#e65100"/></marker></defs>` + "\n")
	fmt.Fprintf(&b, `<title>%s machine</title>`+"\n", html.EscapeString(m.Name))
	// Start marker.
	ip := pos[m.Initial.Name]
	fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="6" fill="#000"/>`+"\n", ip.x-30, ip.y+boxH/2)
	fmt.Fprintf(&b, `<path d="M%.1f,%.1f L%.1f,%.1f" stroke="#444" fill="none" marker-end="url(#arrow)"/>`+"\n", ip.x-24, ip.y+boxH/2, ip.x, ip.y+boxH/2)

	// Edges: one arrow per pair of states and kind, its rows' labels
	// stacked; between the nearest sides of the two boxes, curved so that
	// arrows both ways between two states do not overlap.
	type group struct {
		from, to         string
		internal, choice bool
		labels           []string
		taken            int
	}
	var groups []*group
	byKey := map[[4]string]*group{}
	for _, e := range es {
		k := [4]string{e.from, e.to, fmt.Sprint(e.internal), fmt.Sprint(e.choice)}
		g := byKey[k]
		if g == nil {
			g = &group{from: e.from, to: e.to, internal: e.internal, choice: e.choice}
			byKey[k] = g
			groups = append(groups, g)
		}
		lbl := e.label
		if n := h.taken(e); n > 0 {
			lbl = fmt.Sprintf("%s (%dx)", e.label, n)
			g.taken += n
		}
		g.labels = append(g.labels, lbl)
	}
	seen := map[[2]string]int{}
	for _, e := range groups {
		color, marker, width, dash := "#444", "arrow", 1.0, ""
		switch {
		case e.internal:
			dash = ` stroke-dasharray="5,3"`
		case e.choice:
			dash = ` stroke-dasharray="2,3"`
		}
		if e.taken > 0 {
			color, marker, width = "#e65100", "arrow-taken", 2.5
		}
		a, c := pos[e.from], pos[e.to]
		var d string
		var lx, ly float64
		k := float64(seen[[2]string{e.from, e.to}])
		if e.from == e.to {
			// A loop above the box.
			x0, y0 := a.x+boxW*0.35, a.y
			x1 := a.x + boxW*0.65
			d = fmt.Sprintf("M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f", x0, y0, x0-10, y0-40-18*k, x1+10, y0-40-18*k, x1, y0)
			lx, ly = a.x+boxW/2, y0-34-18*k-10*float64(len(e.labels)-1)
		} else {
			x0, y0 := a.x+boxW, a.y+boxH/2
			x1, y1 := c.x, c.y+boxH/2
			if c.x < a.x { // backwards: leave from the left, enter from the right
				x0, x1 = a.x, c.x+boxW
			} else if c.x == a.x { // same column: from the bottom to the top
				x0, y0, x1, y1 = a.x+boxW/2, a.y+boxH, c.x+boxW/2, c.y
				if c.y < a.y {
					y0, y1 = a.y, c.y+boxH
				}
			}
			bend := 18.0 + 14*k
			if c.x < a.x || (c.x == a.x && c.y < a.y) {
				bend = -bend
			}
			mx, my := (x0+x1)/2, (y0+y1)/2
			dx, dy := x1-x0, y1-y0
			l := math.Hypot(dx, dy)
			if l == 0 {
				l = 1
			}
			cx, cy := mx-dy/l*bend, my+dx/l*bend
			d = fmt.Sprintf("M%.1f,%.1f Q%.1f,%.1f %.1f,%.1f", x0, y0, cx, cy, x1, y1)
			lx, ly = (x0+2*cx+x1)/4, (y0+2*cy+y1)/4-3-5*float64(len(e.labels)-1)
		}
		seen[[2]string{e.from, e.to}]++
		all := strings.Join(e.labels, "; ")
		fmt.Fprintf(&b, `<path d="%s" stroke="%s" stroke-width="%.1f" fill="none"%s marker-end="url(#%s)"><title>%s -&gt; %s: %s</title></path>`+"\n",
			d, color, width, dash, marker, html.EscapeString(e.from), html.EscapeString(e.to), html.EscapeString(all))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="9" text-anchor="middle" fill="%s">`, lx, ly, color)
		for i, l := range e.labels {
			dy := "0"
			if i > 0 {
				dy = "10"
			}
			fmt.Fprintf(&b, `<tspan x="%.1f" dy="%s">%s</tspan>`, lx, dy, html.EscapeString(l))
		}
		b.WriteString("</text>\n")
	}

	// States.
	for _, st := range m.States {
		p := pos[st.Name]
		fill, stroke, sw := "#fff", "#333", 1.2
		if h != nil && st.Name == h.Current {
			fill, stroke, sw = "#ffd54f", "#e65100", 3
		}
		class := "state"
		if h != nil && st.Name == h.Current {
			class = "state current"
		}
		fmt.Fprintf(&b, `<g class="%s" id="state-%s">`, class, html.EscapeString(st.Name))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" rx="8" fill="%s" stroke="%s" stroke-width="%.1f"/>`,
			p.x, p.y, boxW, boxH, fill, stroke, sw)
		if st.Final {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.0f" rx="6" fill="none" stroke="%s"/>`,
				p.x+3, p.y+3, boxW-6, boxH-6, stroke)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" text-anchor="middle">%s</text>`, p.x+boxW/2, p.y+15, html.EscapeString(st.Name))
		if notes := stateNotes(st); len(notes) > 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="8" text-anchor="middle" fill="#555">%s</text>`,
				p.x+boxW/2, p.y+27, html.EscapeString(strings.Join(notes, "; ")))
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
