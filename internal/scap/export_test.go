package scap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
)

// exportInputs are real sysray captures (the doctor's golden recordings:
// forks, threads, a crash, thousands of calls) and a sysdig capture
// imported into sysray's format.
var exportInputs = []string{
	"../doctor/testdata/golden/forkgrow.sysray",
	"../doctor/testdata/golden/crasher.sysray",
	"../doctor/testdata/golden/fdleak-pipe.sysray",
	"imported:curl_google.scap",
}

func exportInput(t *testing.T, in string) string {
	t.Helper()
	if name, ok := cutPrefix(in, "imported:"); ok {
		out := filepath.Join(t.TempDir(), "imported.sysray")
		if _, err := Import(filepath.Join("testdata", name), out, nil); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return in
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return s, false
}

// captureCalls reads a capture's finished calls, and counts its exits.
func captureCalls(t *testing.T, path string) (calls []event.Event, exits int, born map[uint32]bool, arch event.Arch, boot int64, other []string) {
	t.Helper()
	r, err := capture.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	arch, boot = r.Header().Arch, r.Header().BootTime
	born = map[uint32]bool{}
	for {
		var e event.Event
		if err := r.Next(&e); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		switch {
		case e.Kind == event.KindSyscall && !e.Syscall.Unfinished:
			calls = append(calls, e)
		case e.Kind == event.KindExit:
			exits++
		case e.Kind == event.KindFork:
			born[e.Proc.ChildTID] = true
		case e.Kind == event.KindPageFault || e.Kind == event.KindSignalDeliver:
			other = append(other, otherText(&e, boot))
		}
	}
	return calls, exits, born, arch, boot, other
}

// otherText is what a signal delivery or a page fault keeps in scap.
func otherText(e *event.Event, boot int64) string {
	at := int64(e.Time) + boot
	if e.Kind == event.KindPageFault {
		return fmt.Sprintf("%d fault %d at %#x from %#x, error %#x", at, e.TID, e.Fault.Addr, e.Fault.IP, e.Fault.Error)
	}
	return fmt.Sprintf("%d signal %d to %d", at, e.Signal.Sig, e.TID)
}

// The export's blocks are the ones libscap e5c53d64 writes, and every
// event has the parameter count and fixed-size lengths of that table:
// sysdig's parsers index parameters by the table.
func TestExportLayout(t *testing.T) {
	for _, in := range exportInputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			var buf bytes.Buffer
			st, err := Export(exportInput(t, in), &buf)
			if err != nil {
				t.Fatal(err)
			}
			rd, err := NewReader(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if rd.Major != 1 || rd.Minor != 2 {
				t.Errorf("section version %d.%d, want 1.2", rd.Major, rd.Minor)
			}
			var types []uint32
			var ev Event
			events := 0
			var lastTime uint64
			for {
				b, err := rd.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(types) == 0 || types[len(types)-1] != b.Type {
					types = append(types, b.Type)
				}
				switch b.Type {
				case blockMachine:
					if len(b.Body) != 180 {
						t.Errorf("machine info of %d bytes, want scap_machine_info's 180", len(b.Body))
					}
				case blockProcV9:
					ts, err := ParseProcList(9, b.Body)
					if err != nil || len(ts) != st.Threads {
						t.Errorf("process list: %d threads (%v), want %d", len(ts), err, st.Threads)
					}
				case blockEvV2:
					if err := ParseEvent(b.Type, b.Body, &ev); err != nil {
						t.Fatalf("event %d: %v", events, err)
					}
					events++
					if ev.Time < lastTime {
						t.Fatalf("event %d (%s) at %d, after one at %d: not in time order", events, ev.Name(), ev.Time, lastTime)
					}
					lastTime = ev.Time
					ps := writeEvents[ev.Type].params
					if len(ev.Params) != len(ps) {
						t.Fatalf("%s (%d): %d parameters, the table has %d", ev.Name(), ev.Type, len(ev.Params), len(ps))
					}
					for i, p := range ps {
						if w := paramWidth(p.typ); w > 0 && len(ev.Params[i]) != w {
							t.Fatalf("%s.%s: %d bytes, its type %d has %d", ev.Name(), p.name, len(ev.Params[i]), p.typ, w)
						}
						if (p.typ == ptCharbuf || p.typ == ptFSPath || p.typ == ptFSRelPath) && (len(ev.Params[i]) == 0 || ev.Params[i][len(ev.Params[i])-1] != 0) {
							t.Fatalf("%s.%s: string without its NUL: %q", ev.Name(), p.name, ev.Params[i])
						}
					}
				}
			}
			// NewReader took the section header.
			want := fmt.Sprintf("%x", []uint32{blockMachine, blockProcV9, blockEvV2})
			if got := fmt.Sprintf("%x", types); got != want {
				t.Errorf("block types in order %s, want %s", got, want)
			}
			if uint64(events) != st.Events || st.Events != 2*st.Calls+st.Unfinished+st.Exits+st.ChildReturns+st.Signals+st.Faults {
				t.Errorf("%d events in the file, stats say %d (%d calls, %d cut off, %d exits, %d child returns)", events, st.Events, st.Calls, st.Unfinished, st.Exits, st.ChildReturns)
			}
		})
	}
}

// Reading the export back gives each thread's calls in order, with their
// return values and paths, and the threads' exits.
func TestExportReadBack(t *testing.T) {
	for _, in := range exportInputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			path := exportInput(t, in)
			calls, exits, born, arch, boot, other := captureCalls(t, path)
			var gotOther []string
			var buf bytes.Buffer
			est, err := Export(path, &buf)
			if err != nil {
				t.Fatal(err)
			}
			var childReturns uint64
			perThread := map[uint32][]event.Event{}
			gotExits := 0
			st, err := Read(bytes.NewReader(buf.Bytes()), func(e *event.Event) error {
				switch {
				case e.Kind == event.KindSyscall && !e.Syscall.Unfinished:
					// A thread the capture saw begin starts with its own
					// return from clone, which sysray does not record.
					if name := event.SyscallName(event.ArchAMD64, e.Syscall.Nr); born[e.TID] && len(perThread[e.TID]) == 0 && e.Syscall.Ret == 0 &&
						(name == "clone" || name == "clone3" || name == "fork" || name == "vfork") {
						born[e.TID] = false
						childReturns++
						return nil
					}
					perThread[e.TID] = append(perThread[e.TID], *e)
				case e.Kind == event.KindExit:
					gotExits++
				case e.Kind == event.KindPageFault || e.Kind == event.KindSignalDeliver:
					gotOther = append(gotOther, otherText(e, 0))
				}
				return nil
			})
			if fmt.Sprint(gotOther) != fmt.Sprint(other) {
				t.Errorf("signals and faults read back:\n%q\nwant\n%q", gotOther, other)
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Skipped != 0 || st.UnknownTypes != 0 {
				t.Errorf("reading back: %d skipped, %d unknown types: %v", st.Skipped, st.UnknownTypes, st.BadEvents)
			}
			if childReturns != est.ChildReturns {
				t.Errorf("%d child returns from clone read back, the export wrote %d", childReturns, est.ChildReturns)
			}
			if gotExits != exits {
				t.Errorf("%d thread exits read back, the capture has %d", gotExits, exits)
			}
			next := map[uint32]int{}
			var rets, paths int
			for _, c := range calls {
				name := event.SyscallName(arch, c.Syscall.Nr)
				_, imported, hasRet := WrittenAs(name)
				i := next[c.TID]
				next[c.TID]++
				if i >= len(perThread[c.TID]) {
					t.Fatalf("thread %d: call %d (%s) not read back", c.TID, i, name)
				}
				g := &perThread[c.TID][i]
				if gn := event.SyscallName(event.ArchAMD64, g.Syscall.Nr); gn != imported {
					t.Fatalf("thread %d call %d: read back as %s, want %s (written for %s)", c.TID, i, gn, imported, name)
				}
				// scap's times are ns since the epoch.
				if int64(g.Time) != int64(c.Time)+boot || g.Syscall.Latency != c.Syscall.Latency {
					t.Errorf("thread %d call %d (%s): at %d for %d ns, want %d for %d", c.TID, i, name, g.Time, g.Syscall.Latency, c.Time, c.Syscall.Latency)
				}
				if hasRet {
					if g.Syscall.Ret != c.Syscall.Ret {
						t.Errorf("thread %d call %d (%s): returned %d, want %d", c.TID, i, name, g.Syscall.Ret, c.Syscall.Ret)
					}
					rets++
				}
				spec := event.Lookup(arch, c.Syscall.Nr)
				for j := range 6 {
					if spec == nil || j >= len(spec.Args) || spec.Args[j].Kind != event.ArgPath || g.Syscall.Data[j] == nil {
						continue
					}
					if !bytes.Equal(g.Syscall.Data[j], c.Syscall.Data[j]) {
						t.Errorf("thread %d call %d (%s): %s %q, want %q", c.TID, i, name, spec.Args[j].Name, g.Syscall.Data[j], c.Syscall.Data[j])
					}
					paths++
				}
			}
			for tid, cs := range perThread {
				if len(cs) != next[tid] {
					t.Errorf("thread %d: %d calls read back, the capture has %d", tid, len(cs), next[tid])
				}
			}
			if rets == 0 {
				t.Errorf("no return value compared")
			}
			t.Logf("%d calls, %d return values and %d paths compared, %d exits, %d child returns, %d signals and faults", len(calls), rets, paths, exits, childReturns, len(other))
		})
	}
}

// A call's enter and exit carry the decoded arguments at the widths of
// their types: an openat's dirfd as a 64-bit AT_FDCWD, its path, its
// descriptor.
func TestExportOpenat(t *testing.T) {
	nr, _ := event.SyscallByName(event.ArchAMD64, "openat")
	e := &event.Event{Kind: event.KindSyscall, Time: 1000, TID: 7, PID: 7, Comm: "x"}
	e.Syscall = event.Syscall{Nr: nr, Ret: 3, Latency: 50, Args: [6]uint64{0xffffff9c, 0, 0x80000, 0o644}}
	e.Syscall.Data[1] = []byte("/etc/passwd")
	x := &exporter{hdr: &capture.Header{Arch: event.ArchAMD64}}
	spec := event.Lookup(event.ArchAMD64, nr)
	typ := writePairs["openat"]
	en := x.params(typ, "openat", spec, e, false)
	ex := x.params(typ+1, "openat", spec, e, true)
	// openat_2: enter dirfd, name, flags, mode; exit fd, dirfd, name, flags, mode, dev.
	if int64(binary.LittleEndian.Uint64(en[0])) != -100 || string(en[1]) != "/etc/passwd\x00" || len(en[2]) != 4 || binary.LittleEndian.Uint32(en[3]) != 0o644 {
		t.Errorf("enter %q", en)
	}
	if int64(binary.LittleEndian.Uint64(ex[0])) != 3 || int64(binary.LittleEndian.Uint64(ex[1])) != -100 || string(ex[2]) != "/etc/passwd\x00" || len(ex[5]) != 4 {
		t.Errorf("exit %q", ex)
	}
	e.Syscall.Ret = -2
	ex = x.params(typ+1, "openat", spec, e, true)
	if int64(binary.LittleEndian.Uint64(ex[0])) != -2 {
		t.Errorf("failed exit %q", ex)
	}
}

func TestWrittenAs(t *testing.T) {
	for _, c := range []struct {
		name, sysdig, imported string
		ret                    bool
	}{
		{"openat", "openat", "openat", true},
		{"pread64", "pread", "pread64", true},
		{"pipe2", "pipe", "pipe", true},
		{"getppid", "getppid", "getppid", false},
		{"statx", "<unknown>", "statx", false},
		{"rt_sigreturn", "sigreturn", "rt_sigreturn", false},
	} {
		s, i, r := WrittenAs(c.name)
		if s != c.sysdig || i != c.imported || r != c.ret {
			t.Errorf("%s: %s %s %v, want %s %s %v", c.name, s, i, r, c.sysdig, c.imported, c.ret)
		}
	}
}

// A socket address goes out as scap's: family, address, port in host
// order; a Unix socket's path with its NUL. sysdig shows them as
// addr=127.0.0.1:9 and addr=/run/x.
func TestExportSockaddr(t *testing.T) {
	in4 := []byte{2, 0, 0, 9, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	in6 := append([]byte{10, 0, 0x1f, 0x90, 0, 0, 0, 0}, append(make([]byte, 15), 1, 0, 0, 0, 0)...)
	un := append([]byte{1, 0}, "/run/x\x00\x00\x00"...)
	for _, c := range []struct {
		in   []byte
		want string
	}{
		{in4, "\x02\x7f\x00\x00\x01\x09\x00"},
		{in6, "\x0a" + string(make([]byte, 15)) + "\x01\x90\x1f"},
		{un, "\x01/run/x\x00"},
		{[]byte{2, 0, 0}, ""}, // cut short: empty
	} {
		if got := string(sockaddrParam(c.in)); got != c.want {
			t.Errorf("%x: %x, want %x", c.in, got, c.want)
		}
	}
	nr, _ := event.SyscallByName(event.ArchAMD64, "connect")
	e := &event.Event{Kind: event.KindSyscall, TID: 7, PID: 7}
	e.Syscall = event.Syscall{Nr: nr, Ret: -111, Args: [6]uint64{3, 0, 16}}
	e.Syscall.Data[1] = in4
	x := &exporter{hdr: &capture.Header{Arch: event.ArchAMD64}}
	en := x.params(writePairs["connect"], "connect", event.Lookup(event.ArchAMD64, nr), e, false)
	// connect's enter: fd (sysray's sockfd), addr.
	if binary.LittleEndian.Uint64(en[0]) != 3 || string(en[1]) != "\x02\x7f\x00\x00\x01\x09\x00" {
		t.Errorf("connect enter %q", en)
	}
}
