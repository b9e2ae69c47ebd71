package doctor_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/scenarios/variants"
)

// pageSections are the sections every detector's page has, in this order
// (ARCHITECTURE.md, "Adding a detector").
var pageSections = []string{
	"What it means", "Mechanism", "What sysray reads", "Thresholds, and why",
	"Told apart from", "Variants", "Evidence fields", "Fix",
}

// pointerPage is a page that sends its id to the page of the mechanism it
// shares with another id: "`ID` is one mechanism with `OTHER`, and its
// page is [OTHER](OTHER.md)."
var pointerPage = regexp.MustCompile("(?s)^# `([a-z0-9-]+)`\n\n`([a-z0-9-]+)` is one mechanism with `([a-z0-9-]+)`, and its page is \\[([a-z0-9-]+)\\]\\(([a-z0-9-]+)\\.md\\)\\.\n$")

var catalogueRow = regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\|.*\\[details\\]\\(detectors/([a-z0-9-]+)\\.md\\) \\|$")

// TestDetectorDocs holds the docs against the registry: every registered id
// has one catalogue row in docs/doctor.md linking to its page, and a page
// docs/detectors/ID.md with every section (or a pointer to the page of the
// mechanism it shares); no row or page names an id that is not registered;
// and every variant of a detector is a row on the page its id leads to.
func TestDetectorDocs(t *testing.T) {
	ids := doctor.IDs()
	registered := map[string]bool{}
	for _, id := range ids {
		registered[string(id)] = true
	}
	const dir = "../../docs/detectors"

	// page: the file each id's details live in, after a pointer.
	page := map[string]string{}
	texts := map[string]string{}
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		id := strings.TrimSuffix(filepath.Base(f), ".md")
		if !registered[id] {
			t.Errorf("docs/detectors/%s.md: no detector registers %s", id, id)
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[id] = string(b)
	}
	for id, text := range texts {
		if m := pointerPage.FindStringSubmatch(text); m != nil {
			if m[1] != id || m[2] != id || m[3] != m[4] || m[4] != m[5] {
				t.Errorf("docs/detectors/%s.md: a pointer page names %s, %s, %s", id, m[1], m[2], m[3])
				continue
			}
			other, ok := texts[m[3]]
			if !ok || pointerPage.MatchString(other) {
				t.Errorf("docs/detectors/%s.md points to %s.md, which is not a full page", id, m[3])
				continue
			}
			if !strings.Contains(other, "`"+id+"`") {
				t.Errorf("docs/detectors/%s.md points to %s.md, which does not name %s", id, m[3], id)
			}
			page[id] = m[3]
			continue
		}
		page[id] = id
		if !strings.HasPrefix(text, "# ") || !strings.Contains(strings.SplitN(text, "\n", 2)[0], "`"+id+"`") {
			t.Errorf("docs/detectors/%s.md: the title does not name %s", id, id)
		}
		at := 0
		for _, s := range pageSections {
			i := strings.Index(text, "\n## "+s+"\n")
			if i < 0 {
				t.Errorf("docs/detectors/%s.md: no section %q", id, s)
				continue
			}
			if i < at {
				t.Errorf("docs/detectors/%s.md: section %q out of order", id, s)
			}
			at = i
			body := text[i+len("\n## "+s+"\n"):]
			if j := strings.Index(body, "\n## "); j >= 0 {
				body = body[:j]
			}
			if strings.TrimSpace(body) == "" || strings.Contains(body, "TODO") {
				t.Errorf("docs/detectors/%s.md: section %q is empty", id, s)
			}
		}
	}
	for _, id := range ids {
		if _, ok := page[string(id)]; !ok {
			t.Errorf("%s has no page docs/detectors/%s.md", id, id)
		}
	}

	b, err := os.ReadFile("../../docs/doctor.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	for _, m := range catalogueRow.FindAllStringSubmatch(string(b), -1) {
		id := m[1]
		rows[id]++
		if !registered[id] {
			t.Errorf("docs/doctor.md's catalogue has a row for %s, which no detector registers", id)
			continue
		}
		if want := page[id]; want != "" && m[2] != id && m[2] != want {
			t.Errorf("docs/doctor.md's row for %s links to detectors/%s.md, not %s.md", id, m[2], id)
		}
	}
	for _, id := range ids {
		if n := rows[string(id)]; n != 1 {
			t.Errorf("docs/doctor.md's catalogue has %d rows for %s (a row is \"| `%s` | severity | what it looks for. [details](detectors/%s.md) |\")", n, id, id, id)
		}
	}

	var detectors []string
	for _, v := range variants.All {
		d := v.Detector()
		if !registered[d] {
			// A variant group named after no id (none today) has no page to be on.
			continue
		}
		detectors = append(detectors, d)
		p, ok := page[d]
		if !ok {
			continue
		}
		if !strings.Contains(texts[p], "\n| "+v.Name+" |") {
			t.Errorf("variant %s is not a row of docs/detectors/%s.md's Variants table", v.Name, p)
		}
	}
	if len(slices.Compact(slices.Sorted(slices.Values(detectors)))) < 10 {
		t.Errorf("the variants name only %d detectors: are variant names still ID/what-differs?", len(detectors))
	}
}
