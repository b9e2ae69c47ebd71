package profile

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"sort"
	"strings"
)

// fnode is one frame of a merged call tree. a is its weight (in A, for a
// differential graph, and b in B); w its width's weight; stacks how many
// distinct stacks pass through it, for saying how many were not drawn.
type fnode struct {
	name     string
	a, b, w  uint64
	stacks   uint64
	children map[string]*fnode
}

func newTree() *fnode { return &fnode{name: "all", children: map[string]*fnode{}} }

// add adds one stack, root first.
func (n *fnode) add(frames []string, a, b, w uint64) {
	n.a, n.b, n.w, n.stacks = n.a+a, n.b+b, n.w+w, n.stacks+1
	for _, f := range frames {
		c := n.children[f]
		if c == nil {
			c = &fnode{name: f}
			if n.children == nil {
				n.children = map[string]*fnode{}
			}
			n.children[f] = c
		}
		c.a, c.b, c.w, c.stacks = c.a+a, c.b+b, c.w+w, c.stacks+1
		n = c
	}
}

// minWidth is the narrowest frame drawn, in pixels: flamegraph.pl's
// --minwidth default. A frame narrower than a tenth of a pixel cannot be
// seen or clicked, yet 200,000 distinct stacks drew a million of them (a
// 965 MB SVG). Frames under it, and all above them, are left out, and the
// graph says how many stacks and how much weight that was.
const minWidth = 0.1

const (
	svgWidth  = 1200
	rowHeight = 17
	pad       = 10
	charWidth = 7.2 // 12px monospace
	plotWidth = svgWidth - 2*pad
)

// flame is one graph to write.
type flame struct {
	root     *fnode
	title    string
	subtitle string // a second line under the title, or ""
	unit     func(v uint64) string
	// describe gives a frame's tooltip and fill colour.
	describe func(n *fnode, label string) (title, fill string)
}

// pruned is what a flame graph leaves out: the stacks through frames
// narrower than minWidth, their weight, and those frames.
type pruned struct {
	stacks, weight, frames uint64
}

// measure returns the depth of the frames drawn and what is left out.
func (f *flame) measure() (int, pruned) {
	var p pruned
	depth := 0
	minW := minWidth / plotWidth * float64(max(f.root.w, 1))
	var walk func(n *fnode, d int)
	walk = func(n *fnode, d int) {
		depth = max(depth, d)
		for _, c := range n.children {
			if float64(c.w) < minW {
				p.stacks += c.stacks
				p.weight += c.w
				p.frames++
				continue
			}
			walk(c, d+1)
		}
	}
	walk(f.root, 0)
	return depth, p
}

// write streams the SVG to w: one element per frame drawn, so its memory
// is the tree's, not the document's.
func (f *flame) write(w io.Writer) error {
	depth, pr := f.measure()
	top := 40 // the title
	if f.subtitle != "" {
		top += 18
	}
	note := ""
	if pr.stacks > 0 {
		note = fmt.Sprintf("%d of %d stacks (%s, %.2f%% of the width) pass through frames narrower than %.1f px; not drawn",
			pr.stacks, f.root.stacks, f.unit(pr.weight), 100*float64(pr.weight)/float64(max(f.root.w, 1)), minWidth)
		top += 18
	}
	height := (depth+1)*rowHeight + 3*pad + top
	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(bw, `<?xml version="1.0" standalone="no"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="12">
<style>text{pointer-events:none;fill:#000}.f:hover rect{stroke:#000;stroke-width:0.5}.f{cursor:pointer}</style>
<rect x="0" y="0" width="100%%" height="100%%" fill="#fafafa"/>
<text x="%d" y="24" text-anchor="middle" font-size="16">%s</text>
`, svgWidth, height, svgWidth, height, svgWidth/2, html.EscapeString(f.title))
	y := 42
	if f.subtitle != "" {
		fmt.Fprintf(bw, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">%s</text>\n", svgWidth/2, y, html.EscapeString(f.subtitle))
		y += 18
	}
	if note != "" {
		fmt.Fprintf(bw, "<text id=\"pruned\" x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#555\">%s</text>\n", svgWidth/2, y, html.EscapeString(note))
	}
	fmt.Fprintf(bw, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n<g id=\"frames\">\n", pad, height-pad)
	total := float64(max(f.root.w, 1))
	minW := minWidth / plotWidth * total
	var kids []*fnode // one stack of children for the whole walk: each call sorts its own share
	var emit func(n *fnode, x float64, d int)
	emit = func(n *fnode, x float64, d int) {
		wFrac := float64(n.w) / total
		y := height - 2*pad - 20 - (d+1)*rowHeight
		label := n.name
		if k, ok := strings.CutSuffix(label, "_[k]"); ok {
			label = k + " [kernel]" // the colour says it too; the suffix is for folded files
		}
		short := strings.TrimSuffix(label, " [kernel]")
		title, fill := f.describe(n, label)
		fmt.Fprintf(bw, `<g class="f" data-x="%.6f" data-w="%.6f" data-d="%d" data-n="%s"><title>%s</title>`+
			`<rect x="%.1f" y="%d" width="%.1f" height="%d" rx="2" fill="%s"/><text x="%.1f" y="%d">%s</text></g>`+"\n",
			x, wFrac, d, html.EscapeString(short), html.EscapeString(title),
			pad+x*plotWidth, y, wFrac*plotWidth, rowHeight-1, fill,
			pad+x*plotWidth+3, y+rowHeight-5, html.EscapeString(fit(short, wFrac*plotWidth)))
		start := len(kids)
		for _, c := range n.children {
			kids = append(kids, c)
		}
		mine := kids[start:]
		sort.Slice(mine, func(i, j int) bool { return mine[i].name < mine[j].name })
		cx := x
		for _, c := range mine {
			if float64(c.w) >= minW {
				emit(c, cx, d+1)
			}
			cx += float64(c.w) / total
		}
		kids = kids[:start]
	}
	emit(f.root, 0, 0)
	fmt.Fprintf(bw, "</g>\n<script><![CDATA[%s]]></script>\n</svg>\n", zoomScript)
	return bw.Flush()
}
