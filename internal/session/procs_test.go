package session

import (
	"slices"
	"testing"

	"github.com/sysray/sysray/internal/proc"
)

func TestSelected(t *testing.T) {
	// 5 is 4's child and is listed before it; 9 is elsewhere.
	snap := []proc.Info{{PID: 1, PPID: 0, Cgroup: 10}, {PID: 5, PPID: 4, Cgroup: 20}, {PID: 4, PPID: 1, Cgroup: 20}, {PID: 9, PPID: 1, Cgroup: 30}}
	pids := func(ps []proc.Info) []uint32 {
		var out []uint32
		for _, p := range ps {
			out = append(out, p.PID)
		}
		return out
	}
	for _, c := range []struct {
		name     string
		pids     []uint32
		children bool
		cgroups  []uint64
		command  bool
		want     []uint32
	}{
		{"whole host", nil, false, nil, false, []uint32{1, 5, 4, 9}},
		{"a command", nil, false, nil, true, nil},
		{"-p 4", []uint32{4}, false, nil, false, []uint32{4}},
		{"-p 4 --children", []uint32{4}, true, nil, false, []uint32{5, 4}},
		{"-p 1 --children", []uint32{1}, true, nil, false, []uint32{1, 5, 4, 9}},
		{"--cgroup 30", nil, false, []uint64{30}, false, []uint32{9}},
		{"-p 1 --cgroup 30, a command", []uint32{1}, false, []uint64{30}, true, []uint32{1, 9}},
	} {
		if got := pids(Selected(snap, c.pids, c.children, c.cgroups, c.command)); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
