package profile

import (
	"fmt"
	"hash/fnv"
	"io"
	"strings"
)

func (p *Profile) tree() *fnode {
	root := newTree()
	for i := range p.Stacks {
		s := &p.Stacks[i]
		root.add(s.Frames(), s.Count, 0, s.Count)
	}
	return root
}

// SVG writes an interactive flame graph that needs nothing else: no
// external scripts, styles or fonts. Click a frame to zoom, click the root
// to reset; hover for counts. Frames narrower than minWidth are left out,
// and the graph says how many stacks went with them.
func (p *Profile) SVG(w io.Writer, title string) error {
	root := p.tree()
	total := float64(max(root.w, 1))
	f := &flame{root: root, title: title,
		unit: func(v uint64) string { return fmt.Sprintf("%d samples", v) },
		describe: func(n *fnode, label string) (string, string) {
			return fmt.Sprintf("%s (%d samples, %.2f%%)", label, n.a, 100*float64(n.a)/total), color(n.name)
		}}
	return f.write(w)
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
