package profile

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/sysray/sysray/internal/units"
)

// diffTree merges two sets of folded stacks. A frame's width is the sum
// over the stacks through it of the larger of their two weights, so that
// a path that vanished in B stays as visible as one that appeared.
func diffTree(a, b map[string]uint64) *fnode {
	root := newTree()
	for s, va := range a {
		vb := b[s]
		root.add(strings.Split(s, ";"), va, vb, max(va, vb))
	}
	for s, vb := range b {
		if _, ok := a[s]; !ok {
			root.add(strings.Split(s, ";"), 0, vb, vb)
		}
	}
	return root
}

// DiffSVG writes a differential flame graph of two sets of folded stacks
// (frames joined by ';', root first; weights in unit, "ns" or "samples"):
// red where B has more than A, blue where it has less, the deeper the
// colour the larger the change relative to the frame; white where they
// agree. Like SVG's graph it needs nothing else; click to zoom, hover for
// both weights and the change; frames narrower than minWidth are left out.
func DiffSVG(w io.Writer, a, b map[string]uint64, title, unit string) error {
	amount := func(v uint64) string {
		if unit == "ns" {
			return units.Duration(v)
		}
		return fmt.Sprintf("%d %s", v, unit)
	}
	f := &flame{root: diffTree(a, b), title: title, unit: amount,
		subtitle: "red: more in B than in A; blue: less; width: the larger of the two",
		describe: func(n *fnode, label string) (string, string) {
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
			return fmt.Sprintf("%s: A %s, B %s, %s", label, amount(n.a), amount(n.b), change), diffColor(n.a, n.b)
		}}
	return f.write(w)
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
