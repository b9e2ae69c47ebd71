package htmlreport

import (
	"sort"

	"github.com/sysray/sysray/internal/profile"
)

// A flame graph keeps frames of at least 1/flameDetail of the whole (a
// fraction of a pixel at any width a screen has) and at most flameDepth
// deep: what is cut stays in its parent's time.
const (
	flameDetail = 4000
	flameDepth  = 160
)

type tree struct {
	name     string
	value    uint64
	bound    uint64
	children map[string]*tree
}

// fold merges stacks into one tree, rooted at "all"; nil when there are
// none. The stacks of bound count an upper bound of their time, not the
// time itself: each frame says how much of its time is such.
func fold(stacks, bound []profile.Stack) *Node {
	root := &tree{name: "all"}
	for i, ss := range [][]profile.Stack{stacks, bound} {
		for j := range ss {
			root.add(&ss[j], i == 1)
		}
	}
	if root.value == 0 {
		return nil
	}
	return root.node(root.value/flameDetail, 0)
}

func (t *tree) add(s *profile.Stack, bound bool) {
	n := t
	for i, f := range append([]string{""}, s.Frames()...) {
		if i > 0 {
			if n.children == nil {
				n.children = map[string]*tree{}
			}
			c := n.children[f]
			if c == nil {
				c = &tree{name: f}
				n.children[f] = c
			}
			n = c
		}
		n.value += s.Count
		if bound {
			n.bound += s.Count
		}
	}
}

func (t *tree) node(floor uint64, depth int) *Node {
	n := &Node{Name: t.name, Value: t.value, Bound: t.bound}
	if depth == flameDepth {
		return n
	}
	for _, c := range t.children {
		if c.value > floor {
			n.Children = append(n.Children, c.node(floor, depth+1))
		}
	}
	// Alphabetical, as flame graphs are: the same frame sits in the same
	// place in two graphs.
	sort.Slice(n.Children, func(i, j int) bool { return n.Children[i].Name < n.Children[j].Name })
	return n
}
