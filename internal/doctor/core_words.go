package doctor

// Wording shared by findings.

import (
	"sort"
	"strings"
)

func callList(m map[string]uint64) string {
	return strings.Join(byValue(m), ", ")
}

// byValue is m's keys, largest value first, ties by name.
func byValue(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	return keys
}

func joinSentences(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + " " + b
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// keyOf joins the parts of a Finding.Key: what the detector groups its
// findings by, never a count, a time or a pid.
func keyOf(parts ...string) string { return strings.Join(parts, "|") }

// sortedKeys is m's keys in order: for a key, which must not follow the
// counts.
func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// plural is one or many, by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
