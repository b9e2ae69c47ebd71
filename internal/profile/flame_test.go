package profile

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// countWriter counts what it is given and keeps nothing.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// manyStacks is 200,000 distinct stacks of one sample each, under a
// thousand handlers, beside ten stacks of 100,000 samples: the wide frames
// a reader looks at, and a long tail no pixel can show.
func manyStacks() (*Profile, map[string]uint64) {
	p := &Profile{}
	folded := map[string]uint64{}
	for i := range 200000 {
		s := Stack{PID: 1, Comm: "srv", User: []string{"main", fmt.Sprintf("handler%d", i%1000), fmt.Sprintf("leaf%d", i)}, Count: 1}
		p.Stacks = append(p.Stacks, s)
		folded[strings.Join(s.Frames(), ";")] = 1
	}
	for i := range 10 {
		s := Stack{PID: 1, Comm: "srv", User: []string{"main", "hot", fmt.Sprintf("work%d", i)}, Kernel: []string{"write"}, Count: 100000}
		p.Stacks = append(p.Stacks, s)
		folded[strings.Join(s.Frames(), ";")] = 100000
	}
	return p, folded
}

// With 200,000 distinct stacks, the graph draws only frames at least
// minWidth wide, says how many stacks it left out, and is written as it
// goes: before, it drew every frame (a 47 MB SVG here, built whole in
// memory, 357 MiB allocated).
func TestFlameManyStacks(t *testing.T) {
	p, folded := manyStacks()
	half := map[string]uint64{}
	for s, v := range folded {
		if v > 1 {
			half[s] = v / 2
		}
	}
	note := regexp.MustCompile(`<text id="pruned"[^>]*>(\d+) of (\d+) stacks \(([^,]+), [0-9.]+% of the width\) pass through frames narrower than 0.1 px; not drawn</text>`)
	for _, c := range []struct {
		name  string
		write func(w io.Writer) error
		// the stacks and weight left out: the 200,000 of one sample
		stacks, total string
		weight        string
	}{
		{"profile", func(w io.Writer) error { return p.SVG(w, "t") }, "200000", "200010", "200000 samples"},
		{"diff", func(w io.Writer) error { return DiffSVG(w, half, folded, "t", "samples") }, "200000", "200010", "200000 samples"},
	} {
		var cw countWriter
		var err error
		alloc := allocated(func() { err = c.write(&cw) })
		if err != nil {
			t.Fatal(err)
		}
		// A drawn frame is at least 0.1 px of 1,180: at most 11,800 a
		// row, here a few thousand in all, at ~400 bytes each.
		if cw.n > 2<<20 {
			t.Errorf("%s: %d-byte SVG", c.name, cw.n)
		}
		// The tree (a node per frame, 200,000 leaves) and the stacks
		// split into frames: about 200 bytes a stack, 40 MiB; the bound
		// leaves room for the runtime's map growth. The document itself
		// is never held.
		if alloc > 128<<20 {
			t.Errorf("%s: writing allocated %d MiB", c.name, alloc>>20)
		}
		t.Logf("%s: %d-byte SVG, %d MiB allocated", c.name, cw.n, alloc>>20)
		var buf bytes.Buffer
		if err := c.write(&buf); err != nil {
			t.Fatal(err)
		}
		m := note.FindStringSubmatch(buf.String())
		if m == nil || m[1] != c.stacks || m[2] != c.total || m[3] != c.weight {
			t.Errorf("%s: pruned note %q, want %s of %s stacks, %s", c.name, m, c.stacks, c.total, c.weight)
		}
		for _, want := range []string{"work9", "handler"} {
			if !strings.Contains(buf.String(), want) {
				t.Errorf("%s: %s, wide enough to see, is not drawn", c.name, want)
			}
		}
		if strings.Contains(buf.String(), "leaf1<") || strings.Contains(buf.String(), `data-n="leaf`) {
			t.Errorf("%s: a frame of one sample in 1,200,000 is drawn", c.name)
		}
		dec := xml.NewDecoder(&buf)
		for {
			if _, err := dec.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: bad XML: %v", c.name, err)
			}
		}
	}
}
