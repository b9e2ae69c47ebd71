package profile

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

func TestDiffSVG(t *testing.T) {
	a := map[string]uint64{"app;main;write_[k]": 100, "app;main;mmap_[k]": 50}
	b := map[string]uint64{"app;main;write_[k]": 100, "app;main;fsync_[k]": 300}
	root := diffTree(a, b)
	app := root.children["app"]
	// Widths take the larger side of each stack: 100 + 50 + 300.
	if root.w != 450 || app.a != 150 || app.b != 400 || app.children["main"].children["mmap_[k]"].w != 50 {
		t.Fatalf("tree: root %+v app %+v", root, app)
	}
	var buf bytes.Buffer
	if err := DiffSVG(&buf, a, b, "t <&>", "ns"); err != nil {
		t.Fatal(err)
	}
	// Well-formed XML, so a browser draws it.
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("bad XML: %v", err)
		}
	}
	out := buf.String()
	for _, want := range []string{
		`<title>fsync [kernel]: A 0ns, B 300ns, +300ns (new)</title>`,
		`<title>mmap [kernel]: A 50ns, B 0ns, -50ns (-100.0%)</title>`,
		`<title>write [kernel]: A 100ns, B 100ns, no change</title>`,
		"t &lt;&amp;&gt;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the SVG", want)
		}
	}
	if diffColor(0, 300) != "rgb(255,50,50)" || diffColor(50, 0) != "rgb(50,50,255)" || diffColor(100, 100) != "rgb(235,235,235)" {
		t.Errorf("colours: new %s, gone %s, same %s", diffColor(0, 300), diffColor(50, 0), diffColor(100, 100))
	}
}
