package scap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The file layout the writer emits is the one libscap wrote at the
// version Debian's sysdig 0.29 is built on (falcosecurity/libs e5c53d64,
// writetables.go): section header 1.2, machine info, process list v9, and
// v2 event blocks (parameter count in the header, 16-bit lengths).
const (
	WriteMajor   = 1
	WriteMinor   = 2
	WriteLibs    = "e5c53d648f3c4694385bbe488e7d47eaa36c229a"
	writeProc    = blockProcV9
	writeEvBlock = blockEvV2
)

// Event types of the writer's table that the exporter names.
const (
	evGenericE       = 0
	evProcexit1E     = 186
	evSignalDeliverE = 232
	evPageFaultE     = 290
	ppmCLThread      = 1 << 13 // PPM_CL_CLONE_THREAD
)

// MachineInfo is the machine info block's content (the rest is zero).
type MachineInfo struct {
	CPUs     uint32
	Memory   uint64 // bytes
	MaxPID   uint64
	Hostname string
}

// Writer writes a scap file: NewWriter writes the header blocks, Event
// each event.
type Writer struct {
	w   io.Writer
	buf []byte
	err error
}

// NewWriter writes the section header, machine info and process list.
func NewWriter(w io.Writer, mi MachineInfo, threads []Thread) (*Writer, error) {
	wr := &Writer{w: w}
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, sectionMagic)
	b = binary.LittleEndian.AppendUint16(b, WriteMajor)
	b = binary.LittleEndian.AppendUint16(b, WriteMinor)
	b = binary.LittleEndian.AppendUint64(b, ^uint64(0)) // section length: unknown
	wr.block(blockSection, b)

	// scap_machine_info, packed: num_cpus u32, memory u64, max_pid u64,
	// hostname [128], four reserved u64.
	b = b[:0]
	b = binary.LittleEndian.AppendUint32(b, mi.CPUs)
	b = binary.LittleEndian.AppendUint64(b, mi.Memory)
	b = binary.LittleEndian.AppendUint64(b, mi.MaxPID)
	var host [128]byte
	copy(host[:127], mi.Hostname)
	b = append(b, host[:]...)
	b = append(b, make([]byte, 32)...)
	wr.block(blockMachine, b)

	b = b[:0]
	for i := range threads {
		b = appendProcV9(b, &threads[i])
	}
	wr.block(writeProc, b)
	return wr, wr.err
}

// maxStr is libscap's SCAP_MAX_PATH_SIZE less its NUL: the reader refuses
// longer strings in a process list.
const maxStr = 1023

func clip(s string) string {
	if len(s) > maxStr {
		return s[:maxStr]
	}
	return s
}

func appendStr16(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// appendProcV9 appends one process list entry in the v9 layout: its own
// length first, then the fields in libscap's order.
func appendProcV9(b []byte, t *Thread) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, t.TID)
	b = binary.LittleEndian.AppendUint64(b, t.PID)
	b = binary.LittleEndian.AppendUint64(b, t.PTID)
	b = binary.LittleEndian.AppendUint64(b, 0) // session id
	b = binary.LittleEndian.AppendUint64(b, 0) // process group, as its namespace sees it
	b = appendStr16(b, clip(t.Comm))
	exe := t.Exe
	if len(t.Args) > 0 {
		exe = t.Args[0]
	}
	b = appendStr16(b, clip(exe))   // argv[0]
	b = appendStr16(b, clip(t.Exe)) // the executable's path
	b = appendStr16(b, argBytesMax(t.Args, 1, maxProcArgs))
	b = appendStr16(b, clip(t.Cwd))
	b = binary.LittleEndian.AppendUint64(b, 0)     // fd limit
	b = binary.LittleEndian.AppendUint32(b, 0)     // flags
	b = binary.LittleEndian.AppendUint32(b, 0)     // uid
	b = binary.LittleEndian.AppendUint32(b, 0)     // gid
	b = append(b, make([]byte, 4+4+4+8+8)...)      // vm size, rss, swap; major and minor faults
	b = appendStr16(b, "")                         // environment
	b = binary.LittleEndian.AppendUint64(b, t.TID) // tid and pid in their namespace
	b = binary.LittleEndian.AppendUint64(b, t.PID)
	b = appendStr16(b, string(cgroupsBytes(t.Cgroups)))
	b = appendStr16(b, "")                              // root
	b = binary.LittleEndian.AppendUint32(b, ^uint32(0)) // login uid: unknown
	b = append(b, 0)                                    // exe writable
	binary.LittleEndian.PutUint32(b[start:], uint32(len(b)-start))
	return b
}

// maxProcArgs is libscap's SCAP_MAX_ARGS_SIZE less one: its reader
// refuses the whole file over a process list entry whose arguments are
// longer than SCAP_MAX_ARGS_SIZE ("invalid argslen").
const maxProcArgs = 4095

// argBytes is args[from:] as scap keeps a command line: each argument
// followed by its NUL, at most 64 KiB less one (a 16-bit length).
func argBytes(args []string, from int) string {
	return argBytesMax(args, from, 0xffff)
}

// argBytesMax is argBytes of at most limit bytes: the arguments that fit
// whole.
func argBytesMax(args []string, from, limit int) string {
	if from >= len(args) {
		return ""
	}
	var sb strings.Builder
	for _, a := range args[from:] {
		if sb.Len()+len(a)+1 > limit {
			break
		}
		sb.WriteString(a)
		sb.WriteByte(0)
	}
	return sb.String()
}

// block writes one block: type, total length, body padded to 4, length.
func (w *Writer) block(typ uint32, body []byte) {
	if w.err != nil {
		return
	}
	pad := (4 - len(body)%4) % 4
	total := uint32(8 + len(body) + pad + 4)
	b := w.buf[:0]
	b = binary.LittleEndian.AppendUint32(b, typ)
	b = binary.LittleEndian.AppendUint32(b, total)
	b = append(b, body...)
	b = append(b, make([]byte, pad)...)
	b = binary.LittleEndian.AppendUint32(b, total)
	w.buf = b
	_, w.err = w.w.Write(b)
}

// errEventTooBig: the v2 event block has 16-bit parameter lengths.
var errEventTooBig = errors.New("scap: a parameter longer than 65535 bytes")

// encodeEvent appends a v2 event block's body (cpu, header, lengths,
// parameters) to b.
func encodeEvent(b []byte, cpu uint16, ts, tid uint64, typ uint16, params [][]byte) ([]byte, error) {
	b = binary.LittleEndian.AppendUint16(b, cpu)
	n := 26 + 2*len(params)
	for _, p := range params {
		if len(p) > 0xffff {
			return b, errEventTooBig
		}
		n += len(p)
	}
	b = binary.LittleEndian.AppendUint64(b, ts)
	b = binary.LittleEndian.AppendUint64(b, tid)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint16(b, typ)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(params)))
	for _, p := range params {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(p)))
	}
	for _, p := range params {
		b = append(b, p...)
	}
	return b, nil
}

// Event writes one event. Params must have the count and lengths the
// writer's table gives the type: libscap's parsers index parameters by
// the table, not by the count in the header.
func (w *Writer) Event(cpu uint16, ts, tid uint64, typ uint16, params [][]byte) error {
	if int(typ) >= len(writeEvents) {
		return fmt.Errorf("scap: event type %d beyond the table", typ)
	}
	body, err := encodeEvent(nil, cpu, ts, tid, typ, params)
	if err != nil {
		return err
	}
	w.block(writeEvBlock, body)
	return w.err
}

// eventBody writes an already encoded event body.
func (w *Writer) eventBody(body []byte) error {
	w.block(writeEvBlock, body)
	return w.err
}

// paramWidth is the encoded size of a fixed-size parameter type, 0 for
// the variable ones.
func paramWidth(t uint8) int {
	switch t {
	case ptInt8, ptUint8, ptSigtype, 23 /* L4PROTO */, 24 /* SOCKFAMILY */, 28 /* FLAGS8 */ :
		return 1
	case ptInt16, ptUint16, ptSyscallID, 22 /* PORT */, 29 /* FLAGS16 */ :
		return 2
	case ptInt32, ptUint32, 25 /* BOOL */, 26 /* IPV4ADDR */, ptFlags32, 31 /* UID */, 32 /* GID */, 34 /* SIGSET */, 42 /* MODE */ :
		return 4
	case ptInt64, ptUint64, ptErrno, ptFD, ptPID, 20 /* RELTIME */, 21 /* ABSTIME */, 33 /* DOUBLE */ :
		return 8
	case 37: // IPV4NET: address and mask
		return 8
	case 38: // IPV6ADDR
		return 16
	case 39: // IPV6NET
		return 32
	}
	return 0
}

// intParam encodes v in the width of type t (t must be fixed-size).
func intParam(t uint8, v uint64) []byte {
	n := paramWidth(t)
	b := make([]byte, n)
	switch n {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	case 8:
		binary.LittleEndian.PutUint64(b, v)
	}
	return b
}

// emptyParam is a parameter's "nothing known": zero of its width, an
// empty string (its NUL alone: libscap's parsers read strings up to the
// NUL), an empty fd list (count 0), and no bytes for buffers and
// addresses.
func emptyParam(t uint8) []byte {
	if n := paramWidth(t); n > 0 {
		return make([]byte, n)
	}
	switch t {
	case ptCharbuf, ptFSPath, ptFSRelPath:
		return []byte{0}
	case 16: // FDLIST
		return []byte{0, 0}
	}
	return nil
}

func strParam(s string) []byte {
	if len(s) > 0xfffe {
		s = s[:0xfffe]
	}
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}
