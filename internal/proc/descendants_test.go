package proc

import (
	"slices"
	"testing"
)

func TestDescendants(t *testing.T) {
	snap := []Info{{PID: 1, PPID: 0}, {PID: 10, PPID: 1}, {PID: 11, PPID: 10}, {PID: 12, PPID: 11},
		{PID: 20, PPID: 1}, {PID: 13, PPID: 10}, {PID: 30, PPID: 30}}
	got := Descendants(snap, []uint32{10})
	slices.Sort(got)
	if want := []uint32{11, 12, 13}; !slices.Equal(got, want) {
		t.Errorf("Descendants of 10 = %v, want %v", got, want)
	}
	if got := Descendants(snap, []uint32{30}); len(got) != 0 {
		t.Errorf("a process that is its own parent: %v", got)
	}
	if got := Descendants(snap, []uint32{12, 11}); len(got) != 0 {
		t.Errorf("roots are not their own descendants: %v", got)
	}
}
