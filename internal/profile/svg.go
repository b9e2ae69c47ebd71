package profile

import (
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"sort"
	"strings"
)

// node is one frame in the merged call tree.
type node struct {
	name     string
	count    uint64
	children map[string]*node
}

func (p *Profile) tree() *node {
	root := &node{name: "all", children: map[string]*node{}}
	for i := range p.Stacks {
		s := &p.Stacks[i]
		n := root
		n.count += s.Count
		for _, f := range s.Frames() {
			c := n.children[f]
			if c == nil {
				c = &node{name: f, children: map[string]*node{}}
				n.children[f] = c
			}
			c.count += s.Count
			n = c
		}
	}
	return root
}

const (
	svgWidth  = 1200
	rowHeight = 17
	pad       = 10
	charWidth = 7.2 // 12px monospace
)

// SVG writes an interactive flame graph that needs nothing else: no
// external scripts, styles or fonts. Click a frame to zoom, click the root
// to reset; hover for counts.
func (p *Profile) SVG(w io.Writer, title string) error {
	root := p.tree()
	depth := maxDepth(root, 0)
	height := (depth+1)*rowHeight + 3*pad + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" standalone="no"?>
<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" font-family="monospace" font-size="12">
<style>text{pointer-events:none;fill:#000}.f:hover rect{stroke:#000;stroke-width:0.5}.f{cursor:pointer}</style>
<rect x="0" y="0" width="100%%" height="100%%" fill="#fafafa"/>
<text x="%d" y="24" text-anchor="middle" font-size="16">%s</text>
<text id="details" x="%d" y="%d"> </text>
<g id="frames">
`, svgWidth, height, svgWidth, height, svgWidth/2, html.EscapeString(title), pad, height-pad)
	total := float64(max(root.count, 1))
	var emit func(n *node, x float64, d int)
	emit = func(n *node, x float64, d int) {
		wFrac := float64(n.count) / total
		y := height - 2*pad - 20 - (d+1)*rowHeight
		pct := 100 * float64(n.count) / total
		label := n.name
		if k, ok := strings.CutSuffix(label, "_[k]"); ok {
			label = k + " [kernel]" // the colour says it too; the suffix is for folded files
		}
		short := strings.TrimSuffix(label, " [kernel]")
		fmt.Fprintf(&b, `<g class="f" data-x="%.6f" data-w="%.6f" data-d="%d" data-n="%s"><title>%s (%d samples, %.2f%%)</title>`+
			`<rect x="%.1f" y="%d" width="%.1f" height="%d" rx="2" fill="%s"/><text x="%.1f" y="%d">%s</text></g>`+"\n",
			x, wFrac, d, html.EscapeString(short), html.EscapeString(label), n.count, pct,
			pad+x*(svgWidth-2*pad), y, wFrac*(svgWidth-2*pad), rowHeight-1, color(n.name),
			pad+x*(svgWidth-2*pad)+3, y+rowHeight-5, html.EscapeString(fit(short, wFrac*(svgWidth-2*pad))))
		kids := make([]*node, 0, len(n.children))
		for _, c := range n.children {
			kids = append(kids, c)
		}
		sort.Slice(kids, func(i, j int) bool { return kids[i].name < kids[j].name })
		cx := x
		for _, c := range kids {
			emit(c, cx, d+1)
			cx += float64(c.count) / total
		}
	}
	emit(root, 0, 0)
	fmt.Fprintf(&b, "</g>\n<script><![CDATA[%s]]></script>\n</svg>\n", zoomScript)
	_, err := io.WriteString(w, b.String())
	return err
}

func maxDepth(n *node, d int) int {
	m := d
	for _, c := range n.children {
		m = max(m, maxDepth(c, d+1))
	}
	return m
}

// fit shortens a label to the width of its box.
func fit(s string, width float64) string {
	n := int((width - 6) / charWidth)
	if n < 3 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	return s[:n-2] + ".."
}

// color: kernel frames orange, user frames warm red-yellow, process roots
// grey; the hash keeps a function's colour stable between graphs.
func color(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32()
	switch {
	case strings.HasSuffix(name, "_[k]"):
		return fmt.Sprintf("rgb(%d,%d,%d)", 230, 140+v%60, 40+v%30)
	case name == "all" || strings.HasSuffix(name, "]") && strings.Contains(name, "["):
		return fmt.Sprintf("rgb(%d,%d,%d)", 190+v%20, 190+v%20, 200+v%20)
	}
	return fmt.Sprintf("rgb(%d,%d,%d)", 205+v%50, 80+v%110, 40+v%40)
}

// zoomScript rescales the frames under the clicked one to the full width.
const zoomScript = `
(function(){
var W=1200, P=10, CW=7.2;
var gs=[].slice.call(document.querySelectorAll('g.f'));
function fit(s,w){var n=Math.floor((w-6)/CW);if(n<3)return '';return s.length<=n?s:s.slice(0,n-2)+'..';}
function zoom(g){
 var x0=+g.dataset.x, w0=+g.dataset.w, d0=+g.dataset.d;
 gs.forEach(function(e){
  var x=+e.dataset.x, w=+e.dataset.w, d=+e.dataset.d, r=e.querySelector('rect'), t=e.querySelector('text');
  var inside = x>=x0-1e-9 && x+w<=x0+w0+1e-9 && d>=d0;
  var above = d<d0 && x<=x0+1e-9 && x+w>=x0+w0-1e-9;
  if(!inside && !above){e.style.display='none';return;}
  e.style.display='';
  var nx = inside ? (x-x0)/w0 : 0, nw = inside ? w/w0 : 1;
  r.setAttribute('x', P+nx*(W-2*P)); r.setAttribute('width', nw*(W-2*P));
  r.style.opacity = above ? 0.5 : 1;
  t.setAttribute('x', P+nx*(W-2*P)+3); t.textContent = fit(e.dataset.n, nw*(W-2*P));
 });
}
gs.forEach(function(g){
 g.addEventListener('click', function(){ zoom(g); });
 g.addEventListener('mouseover', function(){ document.getElementById('details').textContent = g.querySelector('title').textContent; });
});
})();
`
