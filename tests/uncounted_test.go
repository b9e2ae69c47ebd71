package tests

import (
	"encoding/json"
	"strconv"
	"testing"
)

// The kernel keeps exact counts in one cell per process and syscall,
// 32,768 cells (bpf/maps.h). A run whose processes need more must say how
// many calls went uncounted, not hand the detectors short counts as
// whole. cells makes 1,100 children, alive together until each has made
// 32 syscalls, one call per cell, and returned from its fork (the kernel
// reports clone's exit in the child): 36,300 cells. The parent's own
// cells are made before the children's, so every call lost is a child's.
const cellsChildren, cellsPerChild, cellsMax = 1100, 32 + 1, 32768

// statRows is what stat --by process --json says of a command.
type statRows struct {
	Drops uint64 `json:"drops"`
	Rows  []struct {
		Name  string `json:"name"`
		Calls uint64 `json:"calls"`
	} `json:"rows"`
}

// statByProcess runs argv under stat --by process --json.
func statByProcess(t *testing.T, argv ...string) statRows {
	t.Helper()
	r := runOut(t, append([]string{"stat", "--by", "process", "--json", "--"}, argv...)...)
	if r.code != 0 {
		t.Fatalf("stat exited %d: %s", r.code, r.stderr)
	}
	var out statRows
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// stat, whose rows give the counts, says exactly how many calls it lost:
// the children's calls less those its rows hold.
func TestStatUncountedExact(t *testing.T) {
	requireBPF(t)
	out := statByProcess(t, prog("cells"), strconv.Itoa(cellsChildren), "together")
	// The parent forks and waits for every child: it alone makes more
	// calls than there are children.
	var children uint64
	parents := 0
	for _, row := range out.Rows {
		if row.Calls > cellsChildren {
			parents++
			continue
		}
		children += row.Calls
	}
	if parents != 1 {
		t.Fatalf("%d processes made over %d calls, want the parent alone", parents, cellsChildren)
	}
	made := uint64(cellsChildren * cellsPerChild)
	if made-children != out.Drops {
		t.Errorf("the children made %d calls, the rows hold %d, yet %d were said uncounted", made, children, out.Drops)
	}
	// Over the table's size by 3,532 cells; less what the spill took (the
	// want of memory that comes with such a burst, bpf/maps.h).
	if out.Drops == 0 || out.Drops > made-cellsMax {
		t.Errorf("%d calls uncounted, want 1 to %d (the children's cells over the table's %d)", out.Drops, made-cellsMax, cellsMax)
	}
}

// The doctor says so too.
func TestDoctorUncounted(t *testing.T) {
	requireBPF(t)
	rep := doctorCmd(t, 0, prog("cells"), strconv.Itoa(cellsChildren), "together")
	// A table that allocates as it grows enforces its limit through a
	// per-CPU counter, exact to a batch of 32 per CPU: the slack above.
	if over := uint64(cellsChildren*cellsPerChild - cellsMax); rep.Uncounted == 0 || rep.Uncounted > over+64 {
		t.Errorf("%d calls uncounted, want 1 to %d (the children's cells over the table's %d)", rep.Uncounted, over+64, cellsMax)
	}
}

// A process that ended has its cells let go once read (internal/doctor,
// prune.go): 2,000 children one after the other, 1 ms apart, make 66,000
// cells over about 3 s, twice the table, yet none of their calls goes
// uncounted. Kept, half of them would.
func TestDoctorLetsEndedGo(t *testing.T) {
	requireBPF(t)
	rep := doctorCmd(t, 0, prog("cells"), "2000", "1000")
	if rep.Uncounted != 0 {
		t.Errorf("%d calls uncounted: the cells of ended children were not let go", rep.Uncounted)
	}
}

// stat, too, lets ended processes' cells go during a run and keeps their
// counts (cmd/sysray/stat.go, letGo): 1,500 children one after the other,
// 3 ms apart, make 49,500 cells, half again the table, and every call is
// in the rows. Past stat.KeptMax cells kept (the table's size), ended
// processes' counts are summed in one row.
func TestStatLetsEndedGo(t *testing.T) {
	requireBPF(t)
	const children = 1500
	out := statByProcess(t, prog("cells"), strconv.Itoa(children), "3000")
	var calls, whole, summed uint64
	for _, row := range out.Rows {
		switch {
		case row.Name == "(ended, summed)":
			summed = row.Calls
		case row.Calls > children:
			continue // the parent
		case row.Calls > cellsPerChild:
			t.Errorf("%s: %d calls, want at most %d", row.Name, row.Calls, cellsPerChild)
		case row.Calls == cellsPerChild:
			whole++
		}
		calls += row.Calls
	}
	if out.Drops != 0 || calls != children*cellsPerChild {
		t.Errorf("%d calls uncounted, the children's rows hold %d, want 0 and %d", out.Drops, calls, children*cellsPerChild)
	}
	// The kept cells reached the bound only if more than KeptMax went.
	if whole < 32768/cellsPerChild || summed == 0 {
		t.Errorf("%d children whole and %d calls summed: want at least %d whole, and some summed", whole, summed, 32768/cellsPerChild)
	}
}
