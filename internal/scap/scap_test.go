package scap

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

var fixtures = []string{"cat_write.scap", "curl_google.scap", "open-multiple-files.scap", "single_ipv6_conn.scap"}

// raw is a fixture decompressed.
func raw(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func readAll(t *testing.T, b []byte) ([]event.Event, *Stats, error) {
	t.Helper()
	var evs []event.Event
	st, err := Read(bytes.NewReader(b), func(e *event.Event) error {
		evs = append(evs, *e)
		return nil
	})
	return evs, st, err
}

func calls(evs []event.Event) []event.Event {
	var out []event.Event
	for _, e := range evs {
		if e.Kind == event.KindSyscall {
			out = append(out, e)
		}
	}
	return out
}

func name(nr uint32) string { return event.SyscallName(event.ArchAMD64, nr) }

// The calls of single_ipv6_conn.scap, as sysdig 0.29 prints them
// (sysdig -r FILE -p '%thread.tid %evt.type %evt.latency %evt.rawres'):
// v2 event blocks and a v9 process list.
func TestSingleIPv6Calls(t *testing.T) {
	want := []string{
		"25886 socket 7188 3", "25886 bind 2766 0", "25886 listen 1592 0",
		"25888 socket 6624 3", "25888 connect 7387 -2", "25888 socket 1120 3", "25888 connect 2127 -2",
		"25888 socket 5262 3", "25888 bind 53005 0", "25886 accept 3117403965 4", "25888 connect 84825 -115",
		"25888 write 82529 15", "25886 read 3318 15", "25886 read 2840 0",
	}
	evs, st, err := readAll(t, raw(t, "single_ipv6_conn.scap"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range calls(evs) {
		got = append(got, fmt.Sprintf("%d %s %d %d", e.TID, name(e.Syscall.Nr), e.Syscall.Latency, e.Syscall.Ret))
	}
	if !slices.Equal(got, want) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}
	if st.Version != "1.2" || st.Blocks[blockProcV9] != 1 || st.Blocks[blockEvV2] == 0 {
		t.Errorf("version %s, blocks %v", st.Version, st.Blocks)
	}
	// The descriptor argument of read and write, from the events' fd.
	for _, e := range calls(evs) {
		if n := name(e.Syscall.Nr); (n == "read" || n == "write") && e.Syscall.Args[0] != 4 && e.Syscall.Args[0] != 3 {
			t.Errorf("%s fd %d", n, e.Syscall.Args[0])
		}
	}
}

// open-multiple-files.scap: v1 event blocks (no parameter count), a v6
// process list naming the thread, paths from the open events.
func TestOpenPaths(t *testing.T) {
	evs, st, err := readAll(t, raw(t, "open-multiple-files.scap"))
	if err != nil {
		t.Fatal(err)
	}
	lat := []uint64{21432, 2681, 2149, 2373, 1915, 1985, 1883, 1427, 2935, 3484, 2503, 1927, 3184}
	var opens []event.Event
	for _, e := range calls(evs) {
		if name(e.Syscall.Nr) == "open" {
			opens = append(opens, e)
		}
	}
	if len(opens) != 13 {
		t.Fatalf("%d opens, want 13", len(opens))
	}
	for i, e := range opens {
		path := fmt.Sprintf("/tmp/file-%d", i+1)
		ret := int64(3 + i%2)
		if string(e.Syscall.Data[0]) != path || e.Syscall.Ret != ret || e.Syscall.Latency != lat[i] ||
			e.TID != 16569 || e.PID != 16569 || e.Comm != "python" {
			t.Errorf("open %d: %q = %d in %d ns by %d/%d %q; want %q = %d in %d by 16569/16569 python",
				i, e.Syscall.Data[0], e.Syscall.Ret, e.Syscall.Latency, e.PID, e.TID, e.Comm, path, ret, lat[i])
		}
	}
	if st.Other["procinfo"] != 1183 || st.Skipped != 0 {
		t.Errorf("other %v, skipped %d", st.Other, st.Skipped)
	}
}

// curl_google.scap: execve, a thread made by clone, both threads' exits.
func TestCurlLifecycle(t *testing.T) {
	evs, _, err := readAll(t, raw(t, "curl_google.scap"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		switch e.Kind {
		case event.KindExec:
			got = append(got, fmt.Sprintf("exec %d %s %s %q", e.TID, e.Comm, e.Proc.Filename, e.Proc.Argv))
		case event.KindFork:
			got = append(got, fmt.Sprintf("fork %d child %d/%d thread=%v", e.TID, e.Proc.ChildPID, e.Proc.ChildTID, e.Proc.Thread))
		case event.KindExit:
			got = append(got, fmt.Sprintf("exit %d/%d %s status=%d group_dead=%v", e.PID, e.TID, e.Comm, e.Proc.ExitCode, e.Proc.GroupDead))
		}
	}
	want := []string{
		`exec 17497 curl curl ["curl" "-6" "http://www.google.com"]`,
		"fork 17497 child 17497/17498 thread=true",
		"exit 17497/17498 curl status=0 group_dead=false",
		"exit 17497/17497 curl status=0 group_dead=true",
	}
	if !slices.Equal(got, want) {
		t.Errorf("lifecycle:\n got %q\nwant %q", got, want)
	}
}

// Cutting a file anywhere gives the events before the cut and says where
// the cut is; it never fails or panics.
func TestTruncated(t *testing.T) {
	for _, f := range fixtures {
		b := raw(t, f)
		full, _, err := readAll(t, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, cut := range []int{len(b) - 1, len(b) / 2, len(b) / 3, 100} {
			evs, st, err := readAll(t, b[:cut])
			if err != nil {
				t.Errorf("%s cut at %d: %v", f, cut, err)
				continue
			}
			if st.Truncated == "" || len(evs) > len(full) {
				t.Errorf("%s cut at %d: truncated %q, %d events of %d", f, cut, st.Truncated, len(evs), len(full))
			}
			if w := st.Warnings(); len(w) == 0 || !strings.Contains(w[0], "ends inside a block") {
				t.Errorf("%s cut at %d: warnings %q", f, cut, w)
			}
		}
	}
}

// A block whose two lengths disagree, or whose length is absurd, is an
// error naming its offset; a malformed event inside a sound block is
// skipped and counted.
func TestCorrupted(t *testing.T) {
	b := raw(t, "single_ipv6_conn.scap")
	first := binary.LittleEndian.Uint32(b[4:])
	// The second block's leading length.
	bad := slices.Clone(b)
	binary.LittleEndian.PutUint32(bad[first+4:], 0xfffffff0)
	if _, _, err := readAll(t, bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("byte %d", first)) {
		t.Errorf("absurd length: %v", err)
	}
	bad = slices.Clone(b)
	binary.LittleEndian.PutUint32(bad[first+4:], binary.LittleEndian.Uint32(bad[first+4:])+4)
	if _, _, err := readAll(t, bad); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Errorf("lengths differ: %v", err)
	}
	// An event's own length beyond its block.
	bad = slices.Clone(b)
	off, n := 0, 0
	for off < len(bad) {
		l := int(binary.LittleEndian.Uint32(bad[off+4:]))
		if IsEvent(binary.LittleEndian.Uint32(bad[off:])) {
			// block header 8, cpu 2, flags 4, ts 8, tid 8: the event length
			binary.LittleEndian.PutUint32(bad[off+8+2+4+16:], 1<<20)
			n++
			if n == 3 {
				break
			}
		}
		off += l
	}
	_, st, err := readAll(t, bad)
	if err != nil || st.Skipped != 3 || len(st.BadEvents) != 3 {
		t.Errorf("bad events: err %v, skipped %d %q", err, st.Skipped, st.BadEvents)
	}
	if _, _, err := readAll(t, []byte("not a scap file at all")); err == nil {
		t.Error("text read as scap")
	}
	if _, _, err := readAll(t, nil); err == nil {
		t.Error("empty file read as scap")
	}
}

// A block length far beyond the file costs no more than the file.
func TestNoAllocationBeyondFile(t *testing.T) {
	b := raw(t, "cat_write.scap")
	first := binary.LittleEndian.Uint32(b[4:])
	bad := slices.Clone(b[:first+8])
	binary.LittleEndian.PutUint32(bad[first+4:], maxBlock)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	_, st, err := readAll(t, bad)
	runtime.ReadMemStats(&ms1)
	if err != nil || st.Truncated == "" {
		t.Errorf("err %v, truncated %q", err, st.Truncated)
	}
	// The reader's own buffers (64 KiB each) and a first 1 MiB chunk.
	if d := ms1.TotalAlloc - ms0.TotalAlloc; d > 8<<20 {
		t.Errorf("read of a %d-byte file claiming a %d-byte block allocated %d bytes", len(bad), maxBlock, d)
	}
}

// The v1 event schema's parameter count is found from the lengths, as
// sysdig finds it: every event of the v1 fixtures parses.
func TestV1Events(t *testing.T) {
	for _, f := range []string{"cat_write.scap", "curl_google.scap", "open-multiple-files.scap"} {
		_, st, err := readAll(t, raw(t, f))
		if err != nil || st.Skipped != 0 || st.Blocks[blockEvV1] == 0 || st.Read != st.Blocks[blockEvV1] {
			t.Errorf("%s: err %v, skipped %d %q, blocks %v, read %d", f, err, st.Skipped, st.BadEvents, st.Blocks, st.Read)
		}
	}
}

// Reading the gzip file as published and its decompressed bytes gives
// the same events.
func TestGzip(t *testing.T) {
	for _, f := range fixtures {
		z, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		a, _, err1 := readAll(t, z)
		b, _, err2 := readAll(t, raw(t, f))
		if err1 != nil || err2 != nil || len(a) != len(b) || len(a) == 0 {
			t.Errorf("%s: %v %v, %d and %d events", f, err1, err2, len(a), len(b))
		}
	}
}

func TestEventTable(t *testing.T) {
	// Enter and exit events come in pairs of one name.
	for i := 0; i+1 < len(eventTypes); i += 2 {
		e, x := eventTypes[i], eventTypes[i+1]
		if e.name != "" && x.name != "" && e.name != x.name && e.name != "NA" && x.name != "NA" {
			t.Errorf("events %d and %d: %q and %q", i, i+1, e.name, x.name)
		}
	}
}

// The process lists (v5, v6, v9) parse whole: the processes sysdig names
// from them, with their parents and command lines.
func TestProcLists(t *testing.T) {
	want := map[string]string{
		"curl_google.scap":         `3200 3199 bash ["-bash"]`,
		"open-multiple-files.scap": `16569 2089 python ["python" "open.py"]`,
		"cat_write.scap":           `237 1 lvmetad ["/sbin/lvmetad" "-f"]`,
		"single_ipv6_conn.scap":    `403 1 systemd-journal ["/lib/systemd/systemd-journald"]`,
	}
	for f, w := range want {
		_, st, err := readAll(t, raw(t, f))
		if err != nil || st.Skipped != 0 {
			t.Fatalf("%s: %v, %d skipped %q", f, err, st.Skipped, st.BadEvents)
		}
		found := false
		for _, p := range st.Procs {
			if s := fmt.Sprintf("%d %d %s %q", p.PID, p.PPID, p.Comm, p.Cmdline); s == w {
				found = true
			}
		}
		if !found || len(st.Procs) < 30 {
			t.Errorf("%s: %d processes, none %s", f, len(st.Procs), w)
		}
	}
}

// rewrite re-frames every event block of a file as another event block
// type: flags inserted after the CPU id when the new type has them.
func rewrite(b []byte, from, to uint32, flags bool) []byte {
	var out []byte
	for off := 0; off+8 <= len(b); {
		typ := binary.LittleEndian.Uint32(b[off:])
		l := int(binary.LittleEndian.Uint32(b[off+4:]))
		blk := b[off : off+l]
		off += l
		if typ != from {
			out = append(out, blk...)
			continue
		}
		body := slices.Clone(blk[8 : l-4])
		if flags {
			body = slices.Concat(body[:2], []byte{7, 0, 0, 0}, body[2:])
		}
		n := uint32(12 + len(body))
		out = binary.LittleEndian.AppendUint32(out, to)
		out = binary.LittleEndian.AppendUint32(out, n)
		out = append(out, body...)
		out = binary.LittleEndian.AppendUint32(out, n)
	}
	return out
}

// The block types with flags and with large payloads hold the same events
// as the plain ones.
func TestEventBlockTypes(t *testing.T) {
	for _, c := range []struct {
		file     string
		from, to uint32
		flags    bool
	}{
		{"single_ipv6_conn.scap", blockEvV2, blockEvFV2, true},
		{"single_ipv6_conn.scap", blockEvV2, blockEvV2L, false},
		{"single_ipv6_conn.scap", blockEvV2, blockEvFV2L, true},
		{"open-multiple-files.scap", blockEvV1, blockEvFV1, true},
	} {
		b := raw(t, c.file)
		want, _, err := readAll(t, b)
		if err != nil {
			t.Fatal(err)
		}
		got, st, err := readAll(t, rewrite(b, c.from, c.to, c.flags))
		if err != nil || st.Blocks[c.to] == 0 || st.Skipped != 0 {
			t.Fatalf("%s as %#x: %v, blocks %v, skipped %q", c.file, c.to, err, st.Blocks, st.BadEvents)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s as %#x: events differ", c.file, c.to)
		}
	}
}

// Every syscall event of the table that x86-64 has is named as x86-64
// names it; only the 32-bit calls and socketcall's send and recv are left.
func TestSyscallNames(t *testing.T) {
	var missing []string
	for i := range eventTypes {
		e := &eventTypes[i]
		if e.flags&efSyscall == 0 || e.name == "syscall" || slices.Contains(missing, e.name) {
			continue
		}
		x := &Event{Type: uint16(i)}
		if _, _, ok := syscallNr(nil, x); !ok {
			missing = append(missing, e.name)
		}
	}
	slices.Sort(missing)
	want := []string{"fstat64", "llseek", "lstat64", "mmap2", "recv", "send", "stat64"}
	if !slices.Equal(missing, want) {
		t.Errorf("event names without an x86-64 number: %q, want %q", missing, want)
	}
}

// evBlock frames one v2 event (no flags) of type typ with its parameters.
func evBlock(typ uint16, tid, ts uint64, params ...[]byte) []byte {
	var ev []byte
	ev = binary.LittleEndian.AppendUint64(ev, ts)
	ev = binary.LittleEndian.AppendUint64(ev, tid)
	n := 26 + 2*len(params)
	for _, p := range params {
		n += len(p)
	}
	ev = binary.LittleEndian.AppendUint32(ev, uint32(n))
	ev = binary.LittleEndian.AppendUint16(ev, typ)
	ev = binary.LittleEndian.AppendUint32(ev, uint32(len(params)))
	for _, p := range params {
		ev = binary.LittleEndian.AppendUint16(ev, uint16(len(p)))
	}
	for _, p := range params {
		ev = append(ev, p...)
	}
	body := append([]byte{3, 0}, ev...) // CPU 3
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	return block(blockEvV2, body)
}

func block(typ uint32, body []byte) []byte {
	n := uint32(12 + len(body))
	out := binary.LittleEndian.AppendUint32(nil, typ)
	out = binary.LittleEndian.AppendUint32(out, n)
	out = append(out, body...)
	return binary.LittleEndian.AppendUint32(out, n)
}

func u64(v int64) []byte  { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }

// Events the fixtures lack, built to the table's layout: an openat pair,
// a generic pair known only by the host's number, a page fault, a signal
// delivered and the process's exit, each decoded to the value built.
func TestBuiltEvents(t *testing.T) {
	shb := block(blockSection, slices.Concat(u32(sectionMagic), u16(1), u16(2), u64(-1)))
	file := slices.Concat(shb,
		evBlock(306, 100, 1000, u64(-100), []byte("/etc/x\x00"), u32(1), u32(0)),
		evBlock(307, 100, 1500, u64(5), u64(-100), []byte("/etc/x\x00"), u32(1), u32(0), u32(0), u64(0)),
		evBlock(0, 100, 2000, u16(0), u16(39)),
		evBlock(1, 100, 2100, u16(0), u16(39)),
		evBlock(290, 100, 3000, u64(0x1000), u64(0x401000), u32(1<<1|1<<2|1<<4)),
		evBlock(232, 100, 4000, u64(1), u64(100), []byte{11}),
		evBlock(186, 100, 5000, u64(139), u64(0), []byte{11}, []byte{1}, u64(1)),
	)
	evs, st, err := readAll(t, file)
	if err != nil || st.Skipped != 0 {
		t.Fatalf("%v, %q", err, st.BadEvents)
	}
	var got []string
	for _, e := range evs {
		s := fmt.Sprintf("%s %d/%d cpu%d t%d ", e.Kind, e.PID, e.TID, e.CPU, e.Time)
		switch e.Kind {
		case event.KindSyscall:
			s += fmt.Sprintf("%s(%d, %q) = %d in %d", name(e.Syscall.Nr), int64(e.Syscall.Args[0]), e.Syscall.Data[1], e.Syscall.Ret, e.Syscall.Latency)
		case event.KindPageFault:
			s += fmt.Sprintf("addr %#x ip %#x error %#x", e.Fault.Addr, e.Fault.IP, e.Fault.Error)
		case event.KindSignalDeliver:
			s += fmt.Sprintf("sig %d from %d to %d", e.Signal.Sig, e.Signal.SenderPID, e.Signal.TargetTID)
		case event.KindExit:
			s += fmt.Sprintf("status %d group_dead %v", e.Proc.ExitCode, e.Proc.GroupDead)
		}
		got = append(got, s)
	}
	want := []string{
		`syscall 100/100 cpu3 t1000 openat(-100, "/etc/x") = 5 in 500`,
		`syscall 100/100 cpu3 t2000 getpid(0, "") = 0 in 100`,
		// not present, write, user: the x86 error code's bits 1 and 2
		`page_fault 100/100 cpu3 t3000 addr 0x1000 ip 0x401000 error 0x6`,
		`signal_deliver 100/100 cpu3 t4000 sig 11 from 1 to 100`,
		`exit 100/100 cpu3 t5000 status 139 group_dead true`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n got %q\nwant %q", got, want)
	}
	if a := st.AbsentFor(); slices.Contains(a, "page_faults") || slices.Contains(a, "signal_delivery") {
		t.Errorf("absent %q though the file has faults and signals", a)
	}
}

// An execve of the newest schema: the path argument, the new name, and
// the command line with its secrets redacted, as every command line that
// enters sysray is.
func TestBuiltExecve(t *testing.T) {
	shb := block(blockSection, slices.Concat(u32(sectionMagic), u16(1), u16(2), u64(-1)))
	x := [][]byte{u64(0), []byte("app\x00"), []byte("--password=hunter2\x00-v\x00"), u64(200), u64(200), u64(1),
		[]byte("/\x00"), u64(1024), u64(0), u64(0), u32(0), u32(0), u32(0), []byte("app\x00"), nil, nil, u32(0),
		u64(200), u32(0), u32(0), u64(0), u64(0), u64(0), u64(0), u64(0), u64(0), u32(0),
		[]byte("/usr/bin/app\x00"), u64(200), u32(0), []byte("/usr/local/bin/app\x00")}
	file := slices.Concat(shb,
		evBlock(292, 200, 1000, []byte("/usr/local/bin/app\x00")),
		evBlock(293, 200, 3000, x...),
	)
	evs, st, err := readAll(t, file)
	if err != nil || st.Skipped != 0 || len(evs) != 2 {
		t.Fatalf("%v, %q, %d events", err, st.BadEvents, len(evs))
	}
	ex, sc := evs[0], evs[1]
	if ex.Kind != event.KindExec || ex.Proc.Filename != "/usr/local/bin/app" || ex.Comm != "app" ||
		!slices.Equal(ex.Proc.Argv, []string{"app", "--password=<redacted>", "-v"}) {
		t.Errorf("exec %s %q %q", ex.Comm, ex.Proc.Filename, ex.Proc.Argv)
	}
	if name(sc.Syscall.Nr) != "execve" || string(sc.Syscall.Data[0]) != "/usr/local/bin/app" || sc.Syscall.Latency != 2000 || sc.Comm != "app" {
		t.Errorf("call %s(%q) in %d by %s", name(sc.Syscall.Nr), sc.Syscall.Data[0], sc.Syscall.Latency, sc.Comm)
	}
}

// A .scap.gz cut short (a copy interrupted) imports up to the cut too.
func TestTruncatedGzip(t *testing.T) {
	z, err := os.ReadFile(filepath.Join("testdata", "curl_google.scap"))
	if err != nil {
		t.Fatal(err)
	}
	full, _, _ := readAll(t, z)
	evs, st, err := readAll(t, z[:len(z)/2])
	if err != nil || st.Truncated == "" || len(evs) == 0 || len(evs) >= len(full) {
		t.Errorf("err %v, truncated %q, %d of %d events", err, st.Truncated, len(evs), len(full))
	}
}
