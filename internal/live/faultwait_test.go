package live

import (
	"testing"

	"github.com/sysray/sysray/internal/event"
)

func TestParseMaps(t *testing.T) {
	m := parseMaps([]byte("7f0000000000-7f0006000000 r--s 00001000 fe:00 395574                     /var/tmp/a file\n" +
		"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n" +
		"55d000000000-55d000001000 rw-p 00000000 00:00 0 \n"))
	want := []event.Mapping{
		{Start: 0x7f0000000000, End: 0x7f0006000000, Offset: 0x1000, Inode: 395574, Path: "/var/tmp/a file"},
		{Start: 0x7ffd00000000, End: 0x7ffd00021000, Path: "[stack]"},
		{Start: 0x55d000000000, End: 0x55d000001000},
	}
	if len(m) != len(want) {
		t.Fatalf("%d mappings, want %d: %+v", len(m), len(want), m)
	}
	for i := range want {
		if m[i] != want[i] {
			t.Errorf("mapping %d: %+v, want %+v", i, m[i], want[i])
		}
	}
	if got, ok := findMapping(&pidMaps{m: m}, 0x7f0005ffffff); !ok || got.Path != "/var/tmp/a file" {
		t.Errorf("found %+v %v", got, ok)
	}
	if _, ok := findMapping(&pidMaps{m: m}, 0x7f0006000000); ok {
		t.Error("the end of a mapping is not in it")
	}
}

func TestStatValue(t *testing.T) {
	st := []byte("workingset_refault_anon 3\nworkingset_refault_file 88789\ntotal_workingset_refault_file 99\n")
	if n := statValue(st, "workingset_refault_file"); n != 88789 {
		t.Errorf("workingset_refault_file %d", n)
	}
	if n := statValue(st, "total_workingset_refault_file"); n != 99 {
		t.Errorf("total_workingset_refault_file %d", n)
	}
	if n := statValue(st, "pgmajfault"); n != 0 {
		t.Errorf("absent: %d", n)
	}
}
