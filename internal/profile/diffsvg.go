package profile

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/units"
)

// dnode is one frame of two merged call trees: its weight in A and in B,
// and its width, the sum over the stacks through it of the larger of the
// two, so that a path that vanished in B stays as visible as one that
// appeared.
type dnode struct {
	name     string
	a, b, w  uint64
	children map[string]*dnode
}

func diffTree(a, b map[string]uint64) *dnode {
	root := &dnode{name: "all", children: map[string]*dnode{}}
	add := func(stack string, va, vb uint64) {
		w := max(va, vb)
		n := root
		n.a, n.b, n.w = n.a+va, n.b+vb, n.w+w
		for _, f := range strings.Split(stack, ";") {
			c := n.children[f]
			if c == nil {
				c = &dnode{name: f, children: map[string]*dnode{}}
				n.children[f] = c
			}
			c.a, c.b, c.w = c.a+va, c.b+vb, c.w+w
			n = c
		}
	}
	for s, va := range a {
		add(s, va, b[s])
	}
	for s, vb := range b {
		if _, ok := a[s]; !ok {
			add(s, 0, vb)
		}
	}
	return root
}

func dDepth(n *dnode, d int) int {
	m := d
	for _, c := range n.children {
		m = max(m, dDepth(c, d+1))
	}
	return m
}

// DiffSVG writes a differential flame graph of two sets of folded stacks
// (frames joined by ';', root first; weights in unit, "ns" or "samples"):
// red where B has more than A, blue where it has less, the deeper the
// colour the larger the change relative to the frame; white where they
// agree. Like SVG's graph it needs nothing else; click to zoom, hover for
// both weights and the change.
func DiffSVG(w io.Writer, a, b map[string]uint64, title, unit string) error {
	root := diffTree(a, b)
	depth := dDepth(root, 0)
	height := (depth+1)*rowHeight + 3*pad + 60
	var sb strings.Builder
	fmt.Fprintf(&sb, `<?xml version="1.0" standalone="no"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="12">
<style>text{pointer-events:none;fill:#000}.f:hover rect{stroke:#000;stroke-width:0.5}.f{cursor:pointer}</style>
<rect x="0" y="0" width="100%%" height="100%%" fill="#fafafa"/>
<text x="%d" y="24" text-anchor="middle" font-size="16">%s</text>
<text x="%d" y="42" text-anchor="middle" fill="#555">red: more in B than in A; blue: less; width: the larger of the two</text>
<text id="details" x="%d" y="%d"> </text>
<g id="frames">
`, svgWidth, height, svgWidth, height, svgWidth/2, html.EscapeString(title), svgWidth/2, pad, height-pad)
	total := float64(max(root.w, 1))
	amount := func(v uint64) string {
		if unit == "ns" {
			return units.Duration(v)
		}
		return fmt.Sprintf("%d %s", v, unit)
	}
	var emit func(n *dnode, x float64, d int)
	emit = func(n *dnode, x float64, d int) {
		wFrac := float64(n.w) / total
		y := height - 2*pad - 20 - (d+1)*rowHeight
		label := n.name
		if k, ok := strings.CutSuffix(label, "_[k]"); ok {
			label = k + " [kernel]"
		}
		short := strings.TrimSuffix(label, " [kernel]")
		change := "no change"
		if n.b > n.a {
			change = "+" + amount(n.b-n.a)
		} else if n.a > n.b {
			change = "-" + amount(n.a-n.b)
		}
		if n.a > 0 && n.a != n.b {
			change += fmt.Sprintf(" (%+.1f%%)", 100*(float64(n.b)-float64(n.a))/float64(n.a))
		} else if n.a == 0 {
			change += " (new)"
		}
		fmt.Fprintf(&sb, `<g class="f" data-x="%.6f" data-w="%.6f" data-d="%d" data-n="%s"><title>%s: A %s, B %s, %s</title>`+
			`<rect x="%.1f" y="%d" width="%.1f" height="%d" rx="2" fill="%s"/><text x="%.1f" y="%d">%s</text></g>`+"\n",
			x, wFrac, d, html.EscapeString(short), html.EscapeString(label), amount(n.a), amount(n.b), change,
			pad+x*(svgWidth-2*pad), y, wFrac*(svgWidth-2*pad), rowHeight-1, diffColor(n.a, n.b),
			pad+x*(svgWidth-2*pad)+3, y+rowHeight-5, html.EscapeString(fit(short, wFrac*(svgWidth-2*pad))))
		kids := make([]*dnode, 0, len(n.children))
		for _, c := range n.children {
			kids = append(kids, c)
		}
		sort.Slice(kids, func(i, j int) bool { return kids[i].name < kids[j].name })
		cx := x
		for _, c := range kids {
			emit(c, cx, d+1)
			cx += float64(c.w) / total
		}
	}
	emit(root, 0, 0)
	fmt.Fprintf(&sb, "</g>\n<script><![CDATA[%s]]></script>\n</svg>\n", zoomScript)
	_, err := io.WriteString(w, sb.String())
	return err
}

// diffColor is red for growth, blue for shrinkage, its depth the change
// relative to the larger weight (a frame new in B is full red).
func diffColor(a, b uint64) string {
	m := max(a, b)
	if m == 0 || a == b {
		return "rgb(235,235,235)"
	}
	k := math.Abs(float64(b)-float64(a)) / float64(m)
	v := int(235 - 185*k)
	if b > a {
		return fmt.Sprintf("rgb(255,%d,%d)", v, v)
	}
	return fmt.Sprintf("rgb(%d,%d,255)", v, v)
}
