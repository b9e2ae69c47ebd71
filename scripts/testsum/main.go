// Command testsum reads `go test -json` on its standard input and prints
// what a person needs from a long run: each package's result, the output of
// every test that failed, every skipped test with its reason, a count of
// each, and the slowest tests (where a tier's time goes).
//
// With -times FILE it also appends every test's time to FILE, a line each
// (seconds, result, package, test, tab-separated, slowest first): what a
// tier's split is planned from.
//
// It exits non-zero when a test or a build failed, or, with -skips-fail,
// when any test was skipped: in CI a skip is a check that did not run.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// ev is one line of test2json's output.
type ev struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type result struct {
	pkg, test string
	action    string
	elapsed   float64
	out       []string
}

func main() {
	skipsFail := flag.Bool("skips-fail", false, "exit non-zero when a test was skipped")
	slowest := flag.Int("slowest", 40, "list this many of the slowest tests")
	timesPath := flag.String("times", "", "append every test's time to this file (seconds, result, package, test)")
	flag.Parse()
	var times io.Writer
	if *timesPath != "" {
		f, err := os.OpenFile(*timesPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			os.Exit(2)
		}
		times = f
	}
	code := run(os.Stdin, os.Stdout, *skipsFail, *slowest, times)
	if f, ok := times.(*os.File); ok {
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "testsum:", err)
			code = max(code, 2)
		}
	}
	os.Exit(code)
}

func run(in io.Reader, w io.Writer, skipsFail bool, slowest int, times io.Writer) int {
	tests := map[string]*result{}
	var order []*result
	pkgOut := map[string][]string{}
	var fails, skips, passes, broken int
	var pkgFailed []string
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		var e ev
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// The build's own errors are plain text.
			fmt.Fprintln(w, string(line))
			continue
		}
		if e.Test == "" {
			switch e.Action {
			case "output":
				pkgOut[e.Package] = append(pkgOut[e.Package], e.Output)
			case "pass", "skip":
				fmt.Fprintf(w, "ok   %s %s\n", e.Package, dur(e.Elapsed))
			case "fail":
				fmt.Fprintf(w, "FAIL %s %s\n", e.Package, dur(e.Elapsed))
				pkgFailed = append(pkgFailed, e.Package)
			}
			continue
		}
		key := e.Package + " " + e.Test
		r := tests[key]
		if r == nil {
			r = &result{pkg: e.Package, test: e.Test}
			tests[key] = r
			order = append(order, r)
		}
		switch e.Action {
		case "output":
			r.out = append(r.out, e.Output)
		case "pass", "fail", "skip":
			r.action, r.elapsed = e.Action, e.Elapsed
			switch e.Action {
			case "pass":
				passes++
			case "fail":
				fails++
				fmt.Fprintf(w, "--- FAIL: %s (%s) %s\n", e.Test, e.Package, dur(e.Elapsed))
				for _, o := range r.out {
					fmt.Fprint(w, "    ", o)
				}
			case "skip":
				skips++
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(w, "testsum:", err)
		return 2
	}
	// A package that failed without a failing test: it did not build, or
	// it died (a panic, a timeout) with its output the only account.
	for _, p := range pkgFailed {
		failedTest := false
		for _, r := range order {
			if r.pkg == p && r.action == "fail" {
				failedTest = true
			}
		}
		if !failedTest {
			broken++
			fmt.Fprintf(w, "--- FAIL: package %s\n", p)
			for _, o := range pkgOut[p] {
				fmt.Fprint(w, "    ", o)
			}
		}
	}
	// A test that started and never ended died with its package.
	for _, r := range order {
		if r.action == "" {
			fails++
			fmt.Fprintf(w, "--- UNFINISHED: %s (%s)\n", r.test, r.pkg)
		}
	}

	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped", passes, fails, skips)
	if broken > 0 {
		fmt.Fprintf(w, ", %d package(s) failed outside any test", broken)
	}
	fmt.Fprintln(w)
	if skips > 0 {
		fmt.Fprintln(w, "skipped:")
		for _, r := range order {
			if r.action == "skip" {
				fmt.Fprintf(w, "  %s (%s): %s\n", r.test, r.pkg, skipReason(r.out))
			}
		}
	}
	if slowest > 0 {
		var top []*result
		for _, r := range order {
			// A parent's time holds its subtests': both are listed, so a
			// suite of subtests (TestVariants) shows which of them cost.
			if r.action != "" {
				top = append(top, r)
			}
		}
		sort.SliceStable(top, func(i, j int) bool { return top[i].elapsed > top[j].elapsed })
		if len(top) > slowest {
			top = top[:slowest]
		}
		fmt.Fprintln(w, "slowest:")
		for _, r := range top {
			fmt.Fprintf(w, "  %8s %s (%s)\n", dur(r.elapsed), r.test, r.pkg)
		}
	}
	if times != nil {
		all := slices.Clone(order)
		sort.SliceStable(all, func(i, j int) bool { return all[i].elapsed > all[j].elapsed })
		for _, r := range all {
			if r.action == "" {
				continue // never ended: its time is not known
			}
			fmt.Fprintf(times, "%.2f\t%s\t%s\t%s\n", r.elapsed, r.action, r.pkg, r.test)
		}
	}
	switch {
	case fails > 0 || broken > 0:
		return 1
	case skipsFail && skips > 0:
		fmt.Fprintln(w, "testsum: a skipped test is a check that did not run (-skips-fail)")
		return 1
	}
	return 0
}

// skipReason is the last line a skipped test logged, which t.Skip's
// argument is.
func skipReason(out []string) string {
	for i := len(out) - 1; i >= 0; i-- {
		s := strings.TrimSpace(out[i])
		if s == "" || strings.HasPrefix(s, "--- SKIP") || strings.HasPrefix(s, "=== ") {
			continue
		}
		return s
	}
	return "no reason given"
}

func dur(sec float64) string {
	return (time.Duration(sec * float64(time.Second))).Round(10 * time.Millisecond).String()
}
