package scap

import (
	"encoding/binary"
	"testing"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
)

// Every Linux flag of the tables goes to one scap bit and back, alone
// and with all the others of its table.
func TestFlagsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table []flagBit
		kind  event.ArgKind
	}{
		{"open", openFlagBits, event.ArgOpenFlags},
		{"prot", protBits, event.ArgProt},
		{"mmap", mmapBits, event.ArgMapFlags},
		{"clone", cloneBits, event.ArgCloneFlags},
	} {
		toScap, toLinux := flagConv(tc.kind)
		var all, allPPM uint64
		for _, b := range tc.table {
			if b.ppm&(b.ppm-1) != 0 || allPPM&b.ppm != 0 || all&b.linux != 0 {
				t.Errorf("%s: %#x/%#x not one new bit", tc.name, b.linux, b.ppm)
			}
			all |= b.linux
			allPPM |= b.ppm
			s := toScap(b.linux)
			if tc.kind == event.ArgOpenFlags {
				s &^= ppmORdonly // O_RDONLY is 0 in Linux, a bit in scap
			}
			if s != b.ppm {
				t.Errorf("%s: %#x to scap %#x, want %#x", tc.name, b.linux, s, b.ppm)
			}
			if got := toLinux(toScap(b.linux)); got != b.linux {
				t.Errorf("%s: %#x round trip %#x", tc.name, b.linux, got)
			}
		}
		if got := toLinux(toScap(all)); got != all {
			t.Errorf("%s: all %#x round trip %#x", tc.name, all, got)
		}
	}
	for acc, ppm := range []uint64{ppmORdonly, ppmOWronly, ppmORdonly | ppmOWronly} {
		v := uint64(acc) | 0o100 | 0o1000 // O_CREAT|O_TRUNC
		if s := openToScap(v); s != ppm|1<<2|1<<8 {
			t.Errorf("open %#o to scap %#x", v, s)
		}
		if got := openToLinux(openToScap(v)); got != v {
			t.Errorf("open %#o round trip %#o", v, got)
		}
	}
	// Written as the tracer's bits, read back as the unambiguous part.
	if s := openToScap(0o4010000); s != ppmORdonly|1<<4|ppmOSync { // O_SYNC
		t.Errorf("O_SYNC to scap %#x", s)
	}
	if s := openToScap(0o20200000); s != ppmORdonly|1<<10|ppmOTmpfile { // O_TMPFILE
		t.Errorf("O_TMPFILE to scap %#x", s)
	}
	if l := openToLinux(ppmORdonly | 1<<10 | ppmOTmpfile | 1<<14); l != 0o200000 { // + PPM_O_F_CREATED
		t.Errorf("directory open read back %#o, want O_DIRECTORY", l)
	}
}

// The flags sysdig shows for the Falco fixtures' events:
//
//	sysdig -r cat_write.scap -p '%evt.type %evt.arg.flags' 'evt.type=open and evt.dir=<'
//	  3 × O_RDONLY|O_CLOEXEC, then O_RDONLY
//	sysdig -r curl_google.scap -p '%evt.args' 'evt.type=mmap and evt.dir=>'   (the first two)
//	  prot=1(PROT_READ) flags=2(MAP_PRIVATE); prot=3(PROT_READ|PROT_WRITE) flags=10(MAP_PRIVATE|MAP_ANONYMOUS)
//	sysdig -r curl_google.scap -p '%evt.arg.flags' 'evt.type=clone and evt.dir=<'
//	  CLONE_FILES|CLONE_FS|CLONE_PARENT_SETTID|CLONE_SIGHAND|CLONE_SYSVSEM|CLONE_THREAD|CLONE_VM
func TestFixtureFlags(t *testing.T) {
	got := func(file, sc string, arg int) []string {
		evs, _, err := readAll(t, raw(t, file))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range calls(evs) {
			if name(e.Syscall.Nr) == sc {
				spec := event.Lookup(event.ArchAMD64, e.Syscall.Nr)
				out = append(out, event.FormatArg(spec.Args[arg], e.Syscall.Args[arg], nil, false))
			}
		}
		return out
	}
	check := func(what string, have []string, want ...string) {
		if len(have) < len(want) {
			t.Fatalf("%s: %q, want %q", what, have, want)
		}
		for i, w := range want {
			if have[i] != w {
				t.Errorf("%s %d: %s, want %s", what, i, have[i], w)
			}
		}
	}
	check("cat open flags", got("cat_write.scap", "open", 1), "O_RDONLY|O_CLOEXEC", "O_RDONLY|O_CLOEXEC", "O_RDONLY|O_CLOEXEC", "O_RDONLY")
	check("curl mmap prot", got("curl_google.scap", "mmap", 2), "PROT_READ", "PROT_READ|PROT_WRITE")
	check("curl mmap flags", got("curl_google.scap", "mmap", 3), "MAP_PRIVATE", "MAP_PRIVATE|MAP_ANONYMOUS")
	check("curl clone flags", got("curl_google.scap", "clone", 0), "CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM|CLONE_PARENT_SETTID")
	check("curl socket domain", got("curl_google.scap", "socket", 0), "AF_INET6")
}

// An export writes the tracer's bits where the Linux value was.
func TestExportFlags(t *testing.T) {
	x := &exporter{hdr: &capture.Header{Arch: event.ArchAMD64}}
	enc := func(sc string, args [6]uint64, exit bool) map[string]uint32 {
		nr, _ := event.SyscallByName(event.ArchAMD64, sc)
		e := &event.Event{Kind: event.KindSyscall, Time: 1000, TID: 7, PID: 7, Comm: "x"}
		e.Syscall = event.Syscall{Nr: nr, Ret: 3, Args: args}
		typ := writePairs[sc]
		if exit {
			typ++
		}
		ps := x.params(typ, sc, event.Lookup(event.ArchAMD64, nr), e, exit)
		out := map[string]uint32{}
		for i, p := range writeEvents[typ].params {
			if p.typ == ptFlags32 {
				out[p.name] = binary.LittleEndian.Uint32(ps[i])
			}
		}
		return out
	}
	if f := enc("openat", [6]uint64{0xffffff9c, 0, 0o1101, 0o644}, false); f["flags"] != ppmOWronly|1<<2|1<<8 { // O_WRONLY|O_CREAT|O_TRUNC
		t.Errorf("openat flags %#x", f["flags"])
	}
	if f := enc("mmap", [6]uint64{0, 4096, 3, 0x22, ^uint64(0), 0}, false); f["prot"] != 3 || f["flags"] != 1<<1|1<<3 {
		t.Errorf("mmap %v", f)
	}
	if f := enc("socket", [6]uint64{10, 1, 0}, false); f["domain"] != 10 {
		t.Errorf("socket %v", f)
	}
}
