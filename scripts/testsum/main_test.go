package main

import (
	"bytes"
	"strings"
	"testing"
)

const stream = `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":2.5}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    b_test.go:9: no tmux\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestB","Elapsed":0}
`

func TestSkipsCountedAndNamed(t *testing.T) {
	var out bytes.Buffer
	if code := run(strings.NewReader(stream+`{"Action":"pass","Package":"p","Elapsed":3}`+"\n"), &out, false, 5, nil); code != 0 {
		t.Fatalf("exit %d without -skips-fail:\n%s", code, out.String())
	}
	for _, want := range []string{"1 passed, 0 failed, 1 skipped", "TestB (p): b_test.go:9: no tmux", "2.5s TestA (p)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run(strings.NewReader(stream), &out, true, 5, nil); code == 0 {
		t.Errorf("exit 0 with -skips-fail and a skip:\n%s", out.String())
	}
}

func TestFailuresAndDeadPackages(t *testing.T) {
	var out bytes.Buffer
	in := `{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:3: wrong\n"}
{"Action":"fail","Package":"p","Test":"TestC","Elapsed":1}
{"Action":"fail","Package":"p","Elapsed":1}
{"Action":"run","Package":"q","Test":"TestD"}
{"Action":"output","Package":"q","Output":"panic: test timed out after 1s\n"}
{"Action":"fail","Package":"q","Elapsed":1}
`
	if code := run(strings.NewReader(in), &out, false, 0, nil); code == 0 {
		t.Fatalf("exit 0 on a failure:\n%s", out.String())
	}
	for _, want := range []string{"--- FAIL: TestC (p)", "c_test.go:3: wrong", "--- FAIL: package q", "panic: test timed out", "--- UNFINISHED: TestD (q)", "0 passed, 2 failed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}

func TestTimesEveryTest(t *testing.T) {
	var out, times bytes.Buffer
	run(strings.NewReader(stream+`{"Action":"run","Package":"p","Test":"TestE"}
{"Action":"pass","Package":"p","Test":"TestE","Elapsed":7.25}
{"Action":"run","Package":"p","Test":"TestF"}
`), &out, false, 0, &times)
	want := "7.25\tpass\tp\tTestE\n2.50\tpass\tp\tTestA\n0.00\tskip\tp\tTestB\n"
	if times.String() != want {
		t.Errorf("times:\n%s\nwant (slowest first, the unfinished TestF left out):\n%s", times.String(), want)
	}
}
