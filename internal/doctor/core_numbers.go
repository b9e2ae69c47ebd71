package doctor

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A number a finding's title or summary states must be exact or say it is
// a bound: each is one of the finding's evidence fields (or a process it
// names), as the text formats it (durations, percentages, bytes, counts
// with thousands separators), or the words around it make it a bound.
// TestFindingNumbersAreEvidence checks it over the golden captures and the
// unit tests' findings, and the variants suite over every live variant.

// numberBoundWords, found just before a number, say that it is a bound or an
// estimate, not a measure: "at least 5", "up to 40 ms", "about 2 s".
var numberBoundWords = []string{
	"at least", "at most", "up to", "about", "around", "roughly", "nearly",
	"almost", "more than", "less than", "fewer than",
	"below", "above", "in the first", "~", "≈", "≥",
	"≤", ">", "<", "as much as", "as many as", "no more than",
	"before", "than", "within", "under", "the first",
}

// numberBoundAfter, just after a number and its unit, make it a bound: "40 ms
// at least".
var numberBoundAfter = []string{"at least", "at most", "or more", "or less", "or fewer", "or so"}

// numberUnitScale is what a number with that unit is in the unit evidence keeps
// it in (nanoseconds, bytes, a count, a fraction).
var numberUnitScale = map[string]float64{
	"ns": 1, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9, "min": 60e9, "h": 3600e9,
	"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
	"k": 1e3, "M": 1e6, "G": 1e9,
	"%": 0.01,
}

type statedNumber struct {
	text  string  // as written
	at    int     // byte offset in the text
	value float64 // as written, in its unit
	unit  string
	tol   float64 // half the last printed digit, in its unit
}

var (
	numberHexRE = regexp.MustCompile(`0x[0-9a-fA-F]+`)
	numberPidRE = regexp.MustCompile(`\[\d+\]`)
	numberFdRE  = regexp.MustCompile(`\bfd \d+`)
	// A version is a name too: Linux 6.18, glibc 2.14.
	numberVersionRE = regexp.MustCompile(`\b(?:Linux|glibc) \d+(?:\.\d+)+`)
	// numberGoRE finds the numbers in a Go value's print.
	numberGoRE   = regexp.MustCompile(`-?\d+(?:\.\d+)?(?:e[+-]?\d+)?`)
	numberTextRE = regexp.MustCompile(`(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?`)
)

// blankNames replaces what is not a measured number with spaces, keeping
// offsets: hex addresses, names with a number (a pid in comm[pid], which
// ProcRefs carry; fd 3), a process's command line after its name, example
// calls "name(args) = ret", and quoted text.
func blankNames(s string) string {
	b := []byte(s)
	wipe := func(i, j int) {
		for k := i; k < j && k < len(b); k++ {
			if b[k] != ' ' {
				b[k] = ' '
			}
		}
	}
	for _, m := range numberHexRE.FindAllStringIndex(s, -1) {
		wipe(m[0], m[1])
	}
	// A call written out: an identifier, "(", balanced ")", " = result".
	for i := 0; i < len(s); i++ {
		if s[i] != '(' || i == 0 {
			continue
		}
		r, _ := utf8.DecodeLastRuneInString(s[:i])
		afterPid := i >= 2 && s[i-1] == ' ' && s[i-2] == ']'
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_') && !afterPid {
			continue
		}
		depth, j := 0, i
		for ; j < len(s); j++ {
			if s[j] == '(' {
				depth++
			} else if s[j] == ')' {
				depth--
				if depth == 0 {
					break
				}
			}
		}
		if j == len(s) {
			continue
		}
		end := j + 1
		if !afterPid && strings.HasPrefix(s[end:], " = ") {
			k := end + 3
			for k < len(s) && s[k] != ' ' && s[k] != ';' && s[k] != ',' {
				k++
			}
			if k > 0 && s[k-1] == '.' {
				k--
			}
			end = k
		}
		// The name stays ("clone3" is no number: statedNumbers skips it).
		wipe(i, end)
	}
	// Names with a number: a pid, a descriptor, a version.
	for _, re := range []*regexp.Regexp{numberPidRE, numberFdRE, numberVersionRE} {
		for _, m := range re.FindAllStringIndex(string(b), -1) {
			wipe(m[0], m[1])
		}
	}
	// Quoted text (paths, a call's words) states no measure.
	in := -1
	for i := 0; i < len(b); i++ {
		if b[i] == '"' {
			if in < 0 {
				in = i
			} else {
				wipe(in, i+1)
				in = -1
			}
		}
	}
	return string(b)
}

// statedNumbers finds the numbers a text states, with their units.
func statedNumbers(s string) []statedNumber {
	t := blankNames(s)
	var out []statedNumber
	for _, m := range numberTextRE.FindAllStringIndex(t, -1) {
		i, j := m[0], m[1]
		if i > 0 {
			r, _ := utf8.DecodeLastRuneInString(t[:i])
			// Part of a name (clone3, x86_64, ipv4, vm.max_map_count's
			// dots) or a negative errno.
			if unicode.IsLetter(r) || r == '_' || r == '.' || r == '/' {
				continue
			}
			// A negative number (an errno), but not a range's end
			// (50000-50031).
			if r == '-' && (i < 2 || !unicode.IsDigit(rune(t[i-2]))) {
				continue
			}
		}
		raw := t[i:j]
		v, err := strconv.ParseFloat(strings.ReplaceAll(raw, ",", ""), 64)
		if err != nil {
			continue
		}
		tol := 0.5
		if k := strings.IndexByte(raw, '.'); k >= 0 {
			tol = 0.5 * math.Pow(10, -float64(len(raw)-k-1))
		}
		rest := t[j:]
		unit := ""
		sp := strings.TrimPrefix(rest, " ")
		for _, u := range []string{"ns", "µs", "us", "ms", "min", "s", "h", "KiB", "MiB", "GiB", "TiB", "B", "%", "k", "M", "G", "x"} {
			cand := rest
			if u != "%" && u != "x" && u != "k" && u != "M" && u != "G" {
				cand = sp
			}
			if strings.HasPrefix(cand, u) {
				after := cand[len(u):]
				r, _ := utf8.DecodeRuneInString(after)
				if after == "" || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
					unit = u
					break
				}
			}
		}
		if unit == "" && rest != "" {
			r, _ := utf8.DecodeRuneInString(rest)
			if unicode.IsLetter(r) || r == '_' {
				continue // 3rd, 64bit, 2nd: not a measure
			}
			// 64-bit, 2011-era: part of a word.
			if r == '-' && len(rest) > 1 && unicode.IsLetter(rune(rest[1])) {
				continue
			}
		}
		out = append(out, statedNumber{text: s[i:j], at: i, value: v, unit: unit, tol: tol})
	}
	return out
}

// evidenceNumbers gathers every number a finding carries: numeric
// evidence (at any depth), the numbers its evidence strings state, and
// its processes' pids.
func evidenceNumbers(f *Finding) (raw []float64, stated []statedNumber) {
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case nil, bool:
		case string:
			stated = append(stated, statedNumbers(x)...)
		case map[string]any:
			raw = append(raw, float64(len(x)))
			for _, e := range x {
				walk(e)
			}
		case []any:
			raw = append(raw, float64(len(x)))
			for _, e := range x {
				walk(e)
			}
		case []string:
			// A list's length is a count the text may state ("in 3
			// processes").
			raw = append(raw, float64(len(x)))
			for _, e := range x {
				walk(e)
			}
		default:
			if n, ok := numberOf(v); ok {
				raw = append(raw, n)
				return
			}
			// Typed slices and maps, structs: through their JSON-like
			// print, which states their numbers.
			stated = append(stated, statedNumbers(fmt.Sprint(v))...)
			for _, w := range numberGoRE.FindAllString(fmt.Sprint(v), -1) {
				if n, err := strconv.ParseFloat(w, 64); err == nil {
					raw = append(raw, n)
				}
			}
		}
	}
	for _, v := range f.Evidence {
		walk(v)
	}
	raw = append(raw, float64(len(f.Procs)))
	for _, p := range f.Procs {
		raw = append(raw, float64(p.PID))
	}
	return raw, stated
}

func numberOf(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int8:
		return float64(x), true
	case int16:
		return float64(x), true
	case int32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint8:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// numberMatches says whether a number the text states is one the evidence
// carries.
func numberMatches(n statedNumber, raw []float64, stated []statedNumber) bool {
	near := func(a, b, tol float64) bool { return math.Abs(a-b) <= tol*(1+1e-9) }
	scale := numberUnitScale[n.unit]
	for _, e := range raw {
		// A count or a factor as it is; a share also kept as a
		// percentage.
		if (scale == 0 || n.unit == "%") && near(e, n.value, n.tol) {
			return true
		}
		if scale != 0 && near(e, n.value*scale, n.tol*scale) {
			return true
		}
		// units.Duration prints nanoseconds whole, cut down.
		if n.unit == "ns" && e >= n.value && e < n.value+1 {
			return true
		}
	}
	for _, e := range stated {
		if e.unit == n.unit && near(e.value, n.value, math.Max(e.tol, n.tol)) {
			return true
		}
		es, ns := numberUnitScale[e.unit], scale
		if es != 0 && ns != 0 && near(e.value*es, n.value*ns, math.Max(e.tol*es, n.tol*ns)) {
			return true
		}
	}
	return false
}

// numberBounded says whether the words just before the number at i (or
// just after it and its unit) make it a bound.
func numberBounded(text string, i int, n statedNumber) bool {
	after := strings.TrimLeft(text[i+len(n.text):], " ")
	after = strings.TrimLeft(strings.TrimPrefix(after, n.unit), " ")
	for _, w := range numberBoundAfter {
		if strings.HasPrefix(after, w) {
			return true
		}
	}
	before := strings.ToLower(text[max(0, i-24):i])
	before = strings.TrimRight(before, " ")
	for _, w := range numberBoundWords {
		if strings.HasSuffix(before, w) {
			return true
		}
	}
	return false
}

// NumbersNotInEvidence lists the numbers of a finding's title and summary
// that are neither an evidence field nor said to be a bound.
func NumbersNotInEvidence(f *Finding) []string {
	raw, stated := evidenceNumbers(f)
	var bad []string
	for _, part := range []struct{ name, text string }{{"title", f.Title}, {"summary", f.Summary}} {
		for _, n := range statedNumbers(part.text) {
			if numberMatches(n, raw, stated) || numberBounded(part.text, n.at, n) {
				continue
			}
			ctx := part.text[max(0, n.at-40):min(len(part.text), n.at+len(n.text)+20)]
			bad = append(bad, fmt.Sprintf("%s %s: %q in …%s…", f.ID, part.name, n.text+n.unit, ctx))
		}
	}
	return bad
}
