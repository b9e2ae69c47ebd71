package perfetto

import (
	"bufio"
	"io"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sysray/sysray/internal/export"
)

// Field numbers from perfetto_trace.proto (package perfetto.protos).
const (
	tracePacket = 1 // Trace.packet

	pktTimestamp       = 8
	pktSequenceID      = 10 // trusted_packet_sequence_id
	pktTrackEvent      = 11
	pktInternedData    = 12
	pktSequenceFlags   = 13
	pktClockSnapshot   = 6
	pktTrackDesc       = 60
	pktClockID         = 58 // timestamp_clock_id
	pktDefaults        = 59 // trace_packet_defaults
	pktFirstOnSequence = 87 // first_packet_on_sequence
	defClockID         = 58 // TracePacketDefaults.timestamp_clock_id

	seqIncrementalStateCleared = 1
	seqNeedsIncrementalState   = 2

	clockSnapClocks  = 1
	clockSnapPrimary = 2 // primary_trace_clock
	clockID          = 1
	clockTimestamp   = 2
	clockRealtime    = 1 // BuiltinClock values
	clockMonotonic   = 3
	tdUUID           = 1
	tdName           = 2
	tdProcess        = 3
	tdThread         = 4
	tdParentUUID     = 5
	tdCounter        = 8
	pdPID            = 1
	pdCmdline        = 2
	pdProcessName    = 6
	pdProcessLabels  = 8
	thPID            = 1
	thTID            = 2
	thThreadName     = 5
	cdUnitName       = 6
	teCategoryIIDs   = 3
	teDebugAnnots    = 4
	teType           = 9
	teNameIID        = 10
	teTrackUUID      = 11
	teCounterValue   = 30
	teFlowIDs        = 47
	teTerminatingIDs = 48

	typeSliceBegin = 1
	typeSliceEnd   = 2
	typeInstant    = 3
	typeCounter    = 4

	daNameIID        = 1
	daBoolValue      = 2
	daUintValue      = 3
	daIntValue       = 4
	daStringValue    = 6
	daStringValueIID = 17

	idEventCategories  = 1
	idEventNames       = 2
	idAnnotationNames  = 3
	idAnnotationValues = 29
	internIID          = 1
	internName         = 2 // EventName.name, EventCategory.name, DebugAnnotationName.name; InternedString.str
)

// sequence is the one packet sequence every packet is written on.
const sequence = 1

// Values longer than this are written inline: a path or a stack seldom
// repeats, and interning it would only grow the table.
const maxInternedValue = 64

// maxInternedValues caps the value table, so a capture of endless distinct
// short strings costs inline bytes rather than an ever-growing table.
const maxInternedValues = 1 << 16

// Writer is an export.Sink that writes a Perfetto trace.
type Writer struct {
	w                     *bufio.Writer
	pkt, ev, intern, tmp  []byte
	names, cats, argNames map[string]uint64
	values                map[string]uint64
	newName, newCat       []string
	newArgName, newValue  []string
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{
		w:        bufio.NewWriterSize(w, 256<<10),
		names:    map[string]uint64{},
		cats:     map[string]uint64{},
		argNames: map[string]uint64{},
		values:   map[string]uint64{},
	}
}

// Begin writes a clock snapshot, which clears the sequence's incremental
// state and says which clock the packets' times are in, and a descriptor
// for every track.
func (w *Writer) Begin(h export.Header, tracks []*export.Track) error {
	// Event times are CLOCK_MONOTONIC (bpf_ktime_get_ns). Perfetto assumes
	// BOOTTIME unless told otherwise, and a capture does not record how far
	// BOOTTIME had run ahead of MONOTONIC (the time the machine spent
	// suspended before and during it): so the packets are stamped in
	// MONOTONIC, which is also the trace's own clock, and the snapshot
	// relates it only to what the header knows, REALTIME at the same instant
	// (its boot_time), so that a viewer can show wall-clock times.
	var snap []byte
	for _, c := range []struct {
		id uint64
		ts uint64
	}{{clockMonotonic, h.First}, {clockRealtime, h.First + uint64(h.BootTime)}} {
		var cl []byte
		cl = protowire.AppendTag(cl, clockID, protowire.VarintType)
		cl = protowire.AppendVarint(cl, c.id)
		cl = protowire.AppendTag(cl, clockTimestamp, protowire.VarintType)
		cl = protowire.AppendVarint(cl, c.ts)
		snap = appendBytes(snap, clockSnapClocks, cl)
	}
	snap = appendVarint(snap, clockSnapPrimary, clockMonotonic)
	// The defaults hold for every later packet on the sequence: cheaper
	// than a clock id on each of them.
	var defaults []byte
	defaults = appendVarint(defaults, defClockID, clockMonotonic)
	p := w.pkt[:0]
	p = appendVarint(p, pktTimestamp, h.First)
	p = appendVarint(p, pktClockID, clockMonotonic)
	p = appendVarint(p, pktSequenceID, sequence)
	p = appendVarint(p, pktSequenceFlags, seqIncrementalStateCleared)
	p = appendBytes(p, pktDefaults, defaults)
	p = appendVarint(p, pktFirstOnSequence, 1)
	p = appendBytes(p, pktClockSnapshot, snap)
	w.pkt = p
	if err := w.flushPacket(); err != nil {
		return err
	}
	for _, t := range tracks {
		if err := w.track(t); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) track(t *export.Track) error {
	d := w.tmp[:0]
	d = appendVarint(d, tdUUID, t.UUID)
	if t.Parent != 0 {
		d = appendVarint(d, tdParentUUID, t.Parent)
	}
	switch t.Kind {
	case export.TrackProcess:
		var pd []byte
		pd = appendVarint(pd, pdPID, uint64(t.PID))
		for _, a := range t.Cmdline {
			pd = appendString(pd, pdCmdline, a)
		}
		pd = appendString(pd, pdProcessName, t.Name)
		for _, l := range t.Labels {
			pd = appendString(pd, pdProcessLabels, l)
		}
		d = appendBytes(d, tdProcess, pd)
	case export.TrackThread:
		var td []byte
		td = appendVarint(td, thPID, uint64(t.PID))
		td = appendVarint(td, thTID, uint64(t.TID))
		td = appendString(td, thThreadName, t.Name)
		d = appendBytes(d, tdThread, td)
	case export.TrackCounter:
		d = appendString(d, tdName, t.Name)
		var cd []byte
		cd = appendString(cd, cdUnitName, t.Unit)
		d = appendBytes(d, tdCounter, cd)
	default:
		d = appendString(d, tdName, t.Name)
	}
	w.tmp = d
	p := w.pkt[:0]
	p = appendVarint(p, pktSequenceID, sequence)
	p = appendBytes(p, pktTrackDesc, d)
	w.pkt = p
	return w.flushPacket()
}

// Item writes a slice as a begin and an end event, an instant or a counter
// value as one event.
func (w *Writer) Item(it *export.Item) error {
	switch it.Kind {
	case export.Counter:
		e := w.ev[:0]
		e = appendVarint(e, teType, typeCounter)
		e = appendVarint(e, teTrackUUID, it.Track.UUID)
		e = appendVarint(e, teCounterValue, uint64(it.Value))
		w.ev = e
		return w.event(it.Time)
	case export.Slice:
		if err := w.named(it, typeSliceBegin, it.FlowOut, nil); err != nil {
			return err
		}
		// The flows that end here are on the end event: trace_processor
		// takes flows in time order, and their sources began before this
		// slice ended, though not always before it began.
		e := w.ev[:0]
		e = appendVarint(e, teType, typeSliceEnd)
		e = appendVarint(e, teTrackUUID, it.Track.UUID)
		e = appendFlows(e, teTerminatingIDs, it.FlowIn)
		w.ev = e
		return w.event(it.Time + it.Dur)
	default:
		return w.named(it, typeInstant, it.FlowOut, it.FlowIn)
	}
}

func (w *Writer) named(it *export.Item, typ uint64, out, in []uint64) error {
	e := w.ev[:0]
	e = appendVarint(e, teType, typ)
	e = appendVarint(e, teTrackUUID, it.Track.UUID)
	e = appendVarint(e, teCategoryIIDs, w.iid(w.cats, &w.newCat, it.Cat))
	e = appendVarint(e, teNameIID, w.iid(w.names, &w.newName, it.Name))
	for i := range it.Args {
		e = w.annotation(e, &it.Args[i])
	}
	e = appendFlows(e, teFlowIDs, out)
	e = appendFlows(e, teTerminatingIDs, in)
	w.ev = e
	return w.event(it.Time)
}

func (w *Writer) annotation(e []byte, a *export.Arg) []byte {
	d := w.tmp[:0]
	d = appendVarint(d, daNameIID, w.iid(w.argNames, &w.newArgName, a.Name))
	switch a.Kind {
	case export.ArgInt:
		d = appendVarint(d, daIntValue, uint64(a.Int))
	case export.ArgUint:
		d = appendVarint(d, daUintValue, a.Uint)
	case export.ArgBool:
		var v uint64
		if a.Bool {
			v = 1
		}
		d = appendVarint(d, daBoolValue, v)
	default:
		if _, ok := w.values[a.Str]; ok || (len(a.Str) <= maxInternedValue && len(w.values) < maxInternedValues) {
			d = appendVarint(d, daStringValueIID, w.iid(w.values, &w.newValue, a.Str))
		} else {
			d = appendString(d, daStringValue, a.Str)
		}
	}
	w.tmp = d
	return appendBytes(e, teDebugAnnots, d)
}

// iid is s's id in table, new ones to be defined in the next packet.
func (w *Writer) iid(table map[string]uint64, fresh *[]string, s string) uint64 {
	if id, ok := table[s]; ok {
		return id
	}
	id := uint64(len(table) + 1)
	table[s] = id
	*fresh = append(*fresh, s)
	return id
}

// event wraps the pending track event in a packet with what it interned.
func (w *Writer) event(ts uint64) error {
	in := w.intern[:0]
	in = appendInterned(in, idEventCategories, w.cats, w.newCat)
	in = appendInterned(in, idEventNames, w.names, w.newName)
	in = appendInterned(in, idAnnotationNames, w.argNames, w.newArgName)
	in = appendInterned(in, idAnnotationValues, w.values, w.newValue)
	w.newCat, w.newName, w.newArgName, w.newValue = w.newCat[:0], w.newName[:0], w.newArgName[:0], w.newValue[:0]
	w.intern = in
	p := w.pkt[:0]
	p = appendVarint(p, pktTimestamp, ts)
	p = appendVarint(p, pktSequenceID, sequence)
	p = appendVarint(p, pktSequenceFlags, seqNeedsIncrementalState)
	if len(in) > 0 {
		p = appendBytes(p, pktInternedData, in)
	}
	p = appendBytes(p, pktTrackEvent, w.ev)
	w.pkt = p
	return w.flushPacket()
}

// End flushes what is buffered.
func (w *Writer) End() error { return w.w.Flush() }

func (w *Writer) flushPacket() error {
	var hdr [16]byte
	h := protowire.AppendTag(hdr[:0], tracePacket, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(len(w.pkt)))
	if _, err := w.w.Write(h); err != nil {
		return err
	}
	_, err := w.w.Write(w.pkt)
	return err
}

func appendInterned(b []byte, field protowire.Number, table map[string]uint64, fresh []string) []byte {
	for _, s := range fresh {
		var m []byte
		m = appendVarint(m, internIID, table[s])
		m = appendString(m, internName, s)
		b = appendBytes(b, field, m)
	}
	return b
}

func appendVarint(b []byte, field protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, field, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendBytes(b []byte, field protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// appendString writes s as UTF-8, as proto strings must be: comm, paths and
// argv are bytes on Linux, and a byte that is not UTF-8 becomes U+FFFD.
func appendString(b []byte, field protowire.Number, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendFlows writes flow ids unpacked, as proto2 declares repeated fixed64.
func appendFlows(b []byte, field protowire.Number, ids []uint64) []byte {
	for _, id := range ids {
		b = protowire.AppendTag(b, field, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, id)
	}
	return b
}
