package host

import (
	"bufio"
	"strings"
	"testing"
)

func TestParseSteal(t *testing.T) {
	in := `cpu  2981664 41163 2990180 3418478 87547 0 36676 165664 0 0
cpu0 1 2 3 4 5 6 7 81431 0 0
cpu2 1 2 3 4 5 6 7 12 0 0
cpu1 1 2 3 4 5 6 7 bad 0 0
cpu3 1 2
intr 1 2 3
cpu9 1 2 3 4 5 6 7 99 0 0
`
	got := parseSteal(bufio.NewScanner(strings.NewReader(in)))
	want := []uint64{81431e7, 0, 12e7}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestStealLive(t *testing.T) {
	s, err := Steal()
	if err != nil {
		t.Fatal(err)
	}
	if len(s) == 0 {
		t.Fatal("no CPU in /proc/stat")
	}
}
