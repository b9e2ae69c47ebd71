package htmlreport

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"html/template"
	"io"
	"strings"
)

var (
	//go:embed page.html
	pageHTML string
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string

	page = template.Must(template.New("report").Parse(pageHTML))
)

// Write writes d as one HTML page that needs nothing else: its style,
// script and data are inline, and its Content-Security-Policy forbids it to
// load anything.
func Write(w io.Writer, d *Data, title string) error {
	var blob bytes.Buffer
	enc := json.NewEncoder(&blob)
	// <, > and & become \u003c, \u003e and \u0026, so no string in the
	// data can end the script element it sits in.
	enc.SetEscapeHTML(true)
	if err := enc.Encode(d); err != nil {
		return err
	}
	data := strings.TrimSpace(blob.String())
	// JSON allows U+2028 and U+2029 raw; some script parsers did not.
	data = strings.NewReplacer("\u2028", `\u2028`, "\u2029", `\u2029`).Replace(data)
	return page.Execute(w, struct {
		Title string
		CSS   template.CSS
		JS    template.JS
		Data  template.JS
	}{title, template.CSS(pageCSS), template.JS(pageJS), template.JS(data)})
}
