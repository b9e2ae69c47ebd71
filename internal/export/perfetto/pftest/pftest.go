// Package pftest reads a Perfetto trace back with Perfetto's own published
// schema (schema/, see its README) for tests: it decodes every packet with
// dynamicpb, refuses fields the schema does not define, resolves interned
// names the way trace_processor does (per sequence, honouring the sequence
// flags), and checks that slices nest on every track as trace_processor
// would need them to.
package pftest

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

//go:embed schema/perfetto_trace.descriptor.gz
var schemaGz []byte

var traceDesc = sync.OnceValues(func() (protoreflect.MessageDescriptor, error) {
	zr, err := gzip.NewReader(bytes.NewReader(schemaGz))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		return nil, err
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		return nil, err
	}
	d, err := files.FindDescriptorByName("perfetto.protos.Trace")
	if err != nil {
		return nil, err
	}
	return d.(protoreflect.MessageDescriptor), nil
})

// Track is a TrackDescriptor.
type Track struct {
	UUID, Parent uint64
	Name         string
	// Process descriptor.
	IsProcess   bool
	PID         int64
	ProcessName string
	Labels      []string
	Cmdline     []string
	// Thread descriptor.
	IsThread   bool
	TID        int64
	ThreadName string
	// Counter descriptor.
	IsCounter bool
	Unit      string
}

// Event is a TrackEvent with its interned strings resolved.
type Event struct {
	Index   int // in file order
	TS      uint64
	Type    string // SLICE_BEGIN, SLICE_END, INSTANT, COUNTER
	Track   uint64
	Name    string
	Cat     string
	Args    map[string]string // debug annotations, values as text
	Flows   []uint64
	Ends    []uint64 // terminating flow ids
	Counter int64
	Clock   uint64 // the builtin clock TS is in, resolved as trace_processor does
}

// Trace is a decoded trace.
type Trace struct {
	Tracks map[uint64]*Track
	Events []Event
	Clocks map[uint64]uint64 // the first clock snapshot: builtin clock id → timestamp
	// Clock is the trace's own clock, which every timestamp is converted
	// to: the snapshot's primary_trace_clock, else BOOTTIME.
	Clock uint64
}

// Builtin clock ids (perfetto.protos.BuiltinClock).
const (
	ClockRealtime  = 1
	ClockMonotonic = 3
	ClockBoottime  = 6
)

// seqState is what trace_processor keeps per packet sequence.
type seqState struct {
	cleared bool
	tables  map[string]map[uint64]string // InternedData field → iid → string
	clock   uint64                       // TracePacketDefaults.timestamp_clock_id, 0 for none
}

// Decode parses a trace with the official schema.
func Decode(b []byte) (*Trace, error) {
	md, err := traceDesc()
	if err != nil {
		return nil, fmt.Errorf("loading Perfetto's schema: %w", err)
	}
	msg := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{}).Unmarshal(b, msg); err != nil {
		return nil, fmt.Errorf("not a perfetto.protos.Trace: %w", err)
	}
	if err := noUnknown(msg, "Trace"); err != nil {
		return nil, err
	}
	t := &Trace{Tracks: map[uint64]*Track{}}
	seqs := map[uint64]*seqState{}
	packets := msg.Get(fd(md, "packet")).List()
	for i := 0; i < packets.Len(); i++ {
		p := packets.Get(i).Message()
		pd := p.Descriptor()
		seq := p.Get(fd(pd, "trusted_packet_sequence_id")).Uint()
		st := seqs[seq]
		if st == nil {
			st = &seqState{}
			seqs[seq] = st
		}
		flags := p.Get(fd(pd, "sequence_flags")).Uint()
		if flags&1 != 0 || p.Get(fd(pd, "incremental_state_cleared")).Bool() {
			st.cleared = true
			st.tables = map[string]map[uint64]string{}
			st.clock = 0
		}
		if has(p, "trace_packet_defaults") {
			// trace_processor reads the defaults before the packet's own
			// timestamp: they hold for this packet too.
			d := p.Get(fd(pd, "trace_packet_defaults")).Message()
			st.clock = d.Get(fd(d.Descriptor(), "timestamp_clock_id")).Uint()
		}
		if has(p, "interned_data") {
			if !st.cleared {
				return nil, fmt.Errorf("packet %d: interned data before the sequence's state was cleared", i)
			}
			in := p.Get(fd(pd, "interned_data")).Message()
			var err error
			in.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
				if !f.IsList() || f.Message() == nil {
					return true
				}
				tab := st.tables[string(f.Name())]
				if tab == nil {
					tab = map[uint64]string{}
					st.tables[string(f.Name())] = tab
				}
				l := v.List()
				for j := 0; j < l.Len(); j++ {
					m := l.Get(j).Message()
					iid := m.Get(fd(m.Descriptor(), "iid")).Uint()
					var s string
					if nf := m.Descriptor().Fields().ByName("name"); nf != nil {
						s = m.Get(nf).String()
					} else if sf := m.Descriptor().Fields().ByName("str"); sf != nil {
						s = string(m.Get(sf).Bytes())
					}
					if _, dup := tab[iid]; dup {
						err = fmt.Errorf("packet %d: %s iid %d defined twice", i, f.Name(), iid)
						return false
					}
					tab[iid] = s
				}
				return true
			})
			if err != nil {
				return nil, err
			}
		}
		switch {
		case has(p, "clock_snapshot") && t.Clocks == nil:
			t.Clocks = map[uint64]uint64{}
			cl := p.Get(fd(pd, "clock_snapshot")).Message()
			t.Clock = uint64(cl.Get(fd(cl.Descriptor(), "primary_trace_clock")).Enum())
			l := cl.Get(fd(cl.Descriptor(), "clocks")).List()
			for j := 0; j < l.Len(); j++ {
				c := l.Get(j).Message()
				t.Clocks[c.Get(fd(c.Descriptor(), "clock_id")).Uint()] = c.Get(fd(c.Descriptor(), "timestamp")).Uint()
			}
		case has(p, "track_descriptor"):
			tr := track(p.Get(fd(pd, "track_descriptor")).Message())
			if tr.UUID == 0 {
				return nil, fmt.Errorf("packet %d: track descriptor without a uuid", i)
			}
			if _, dup := t.Tracks[tr.UUID]; dup {
				return nil, fmt.Errorf("packet %d: track %d described twice", i, tr.UUID)
			}
			t.Tracks[tr.UUID] = tr
		case has(p, "track_event"):
			if !has(p, "timestamp") {
				return nil, fmt.Errorf("packet %d: track event without a timestamp", i)
			}
			needs := flags&2 != 0
			e, err := event(p.Get(fd(pd, "track_event")).Message(), st, needs)
			if err != nil {
				return nil, fmt.Errorf("packet %d: %w", i, err)
			}
			e.Index, e.TS = len(t.Events), p.Get(fd(pd, "timestamp")).Uint()
			e.Clock = p.Get(fd(pd, "timestamp_clock_id")).Uint()
			if e.Clock == 0 {
				e.Clock = st.clock
			}
			t.Events = append(t.Events, e)
		}
	}
	if t.Clock == 0 {
		t.Clock = ClockBoottime
	}
	// trace_processor converts every timestamp to the trace's clock through
	// the clock snapshots, and drops a packet whose clock they do not
	// relate to it.
	for i := range t.Events {
		e := &t.Events[i]
		if e.Clock == 0 {
			e.Clock = t.Clock
		}
		if e.Clock == t.Clock {
			continue
		}
		_, from := t.Clocks[e.Clock]
		_, to := t.Clocks[t.Clock]
		if !from || !to {
			return nil, fmt.Errorf("event %d (%s) is timed in clock %d, which no clock snapshot relates to the trace's clock %d", i, e.Name, e.Clock, t.Clock)
		}
	}
	return t, nil
}

func track(m protoreflect.Message) *Track {
	d := m.Descriptor()
	tr := &Track{UUID: m.Get(fd(d, "uuid")).Uint(), Parent: m.Get(fd(d, "parent_uuid")).Uint(), Name: m.Get(fd(d, "name")).String()}
	if has(m, "process") {
		p := m.Get(fd(d, "process")).Message()
		pd := p.Descriptor()
		tr.IsProcess = true
		tr.PID = p.Get(fd(pd, "pid")).Int()
		tr.ProcessName = p.Get(fd(pd, "process_name")).String()
		tr.Labels = strs(p.Get(fd(pd, "process_labels")).List())
		tr.Cmdline = strs(p.Get(fd(pd, "cmdline")).List())
	}
	if has(m, "thread") {
		th := m.Get(fd(d, "thread")).Message()
		td := th.Descriptor()
		tr.IsThread = true
		tr.PID = th.Get(fd(td, "pid")).Int()
		tr.TID = th.Get(fd(td, "tid")).Int()
		tr.ThreadName = th.Get(fd(td, "thread_name")).String()
	}
	if has(m, "counter") {
		c := m.Get(fd(d, "counter")).Message()
		tr.IsCounter = true
		tr.Unit = c.Get(fd(c.Descriptor(), "unit_name")).String()
	}
	return tr
}

var typeNames = map[int32]string{1: "SLICE_BEGIN", 2: "SLICE_END", 3: "INSTANT", 4: "COUNTER"}

func event(m protoreflect.Message, st *seqState, needs bool) (Event, error) {
	d := m.Descriptor()
	e := Event{Track: m.Get(fd(d, "track_uuid")).Uint(), Args: map[string]string{}}
	typ := int32(m.Get(fd(d, "type")).Enum())
	e.Type = typeNames[typ]
	if e.Type == "" {
		return e, fmt.Errorf("track event of type %d", typ)
	}
	lookup := func(table string, iid uint64) (string, error) {
		if !needs {
			return "", fmt.Errorf("interned %s %d used by a packet without SEQ_NEEDS_INCREMENTAL_STATE", table, iid)
		}
		s, ok := st.tables[table][iid]
		if !ok {
			return "", fmt.Errorf("interned %s %d used before it was defined", table, iid)
		}
		return s, nil
	}
	var err error
	if has(m, "name_iid") {
		if e.Name, err = lookup("event_names", m.Get(fd(d, "name_iid")).Uint()); err != nil {
			return e, err
		}
	} else {
		e.Name = m.Get(fd(d, "name")).String()
	}
	cats := m.Get(fd(d, "category_iids")).List()
	for i := 0; i < cats.Len(); i++ {
		if e.Cat, err = lookup("event_categories", cats.Get(i).Uint()); err != nil {
			return e, err
		}
	}
	anns := m.Get(fd(d, "debug_annotations")).List()
	for i := 0; i < anns.Len(); i++ {
		a := anns.Get(i).Message()
		ad := a.Descriptor()
		name := a.Get(fd(ad, "name")).String()
		if has(a, "name_iid") {
			if name, err = lookup("debug_annotation_names", a.Get(fd(ad, "name_iid")).Uint()); err != nil {
				return e, err
			}
		}
		var v string
		switch {
		case has(a, "string_value"):
			v = a.Get(fd(ad, "string_value")).String()
		case has(a, "string_value_iid"):
			if v, err = lookup("debug_annotation_string_values", a.Get(fd(ad, "string_value_iid")).Uint()); err != nil {
				return e, err
			}
		case has(a, "int_value"):
			v = strconv.FormatInt(a.Get(fd(ad, "int_value")).Int(), 10)
		case has(a, "uint_value"):
			v = strconv.FormatUint(a.Get(fd(ad, "uint_value")).Uint(), 10)
		case has(a, "bool_value"):
			v = strconv.FormatBool(a.Get(fd(ad, "bool_value")).Bool())
		default:
			return e, fmt.Errorf("annotation %q has no value sysray writes", name)
		}
		if _, dup := e.Args[name]; dup {
			return e, fmt.Errorf("annotation %q twice on one event", name)
		}
		e.Args[name] = v
	}
	e.Flows = uints(m.Get(fd(d, "flow_ids")).List())
	e.Ends = uints(m.Get(fd(d, "terminating_flow_ids")).List())
	e.Counter = m.Get(fd(d, "counter_value")).Int()
	return e, nil
}

// Slice is a matched begin and end, or an instant (Dur 0).
type Slice struct {
	Event // the begin (or instant), with its name and arguments
	Dur   uint64
	Depth int
	Ends  []uint64 // flows that end on it, from either event
}

// Slices replays the events in the order trace_processor does (by
// timestamp, then file order) and returns every slice, checking on the way
// that each track's slices nest: every end closes the slice last begun on
// its track, nothing is left open, and every flow that ends began earlier.
func (t *Trace) Slices() ([]Slice, error) {
	order := make([]int, len(t.Events))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ta, tb := t.Events[a].TS, t.Events[b].TS
		switch {
		case ta < tb:
			return -1
		case ta > tb:
			return 1
		}
		return 0
	})
	stacks := map[uint64][]int{} // track → open slices (indexes into out)
	var out []Slice
	begun := map[uint64]bool{}
	ended := map[uint64]bool{}
	flows := func(e *Event) error {
		for _, id := range e.Flows {
			if begun[id] {
				return fmt.Errorf("flow %d begins twice", id)
			}
			begun[id] = true
		}
		for _, id := range e.Ends {
			if !begun[id] || ended[id] {
				return fmt.Errorf("flow %d ends at %d (%s on track %d) without having begun", id, e.TS, e.Name, e.Track)
			}
			ended[id] = true
		}
		return nil
	}
	for _, i := range order {
		e := &t.Events[i]
		tr := t.Tracks[e.Track]
		if tr == nil {
			return nil, fmt.Errorf("event %d (%s) on undescribed track %d", i, e.Name, e.Track)
		}
		if e.Type == "COUNTER" {
			if !tr.IsCounter {
				return nil, fmt.Errorf("counter value on track %d, which is not a counter", e.Track)
			}
			continue
		}
		if tr.IsCounter {
			return nil, fmt.Errorf("%s %s on counter track %d", e.Type, e.Name, e.Track)
		}
		st := stacks[e.Track]
		switch e.Type {
		case "SLICE_BEGIN":
			if err := flows(e); err != nil {
				return nil, err
			}
			out = append(out, Slice{Event: *e, Depth: len(st), Ends: e.Ends})
			stacks[e.Track] = append(st, len(out)-1)
		case "SLICE_END":
			if len(st) == 0 {
				return nil, fmt.Errorf("end at %d on track %d with no slice open", e.TS, e.Track)
			}
			s := &out[st[len(st)-1]]
			if e.TS < s.TS {
				return nil, fmt.Errorf("%s on track %d ends at %d before it began at %d", s.Name, e.Track, e.TS, s.TS)
			}
			if err := flows(e); err != nil {
				return nil, err
			}
			s.Dur = e.TS - s.TS
			s.Ends = append(s.Ends, e.Ends...)
			stacks[e.Track] = st[:len(st)-1]
		case "INSTANT":
			if err := flows(e); err != nil {
				return nil, err
			}
			out = append(out, Slice{Event: *e, Depth: len(st), Ends: e.Ends})
		}
	}
	for uuid, st := range stacks {
		if len(st) > 0 {
			return nil, fmt.Errorf("track %d: %d slice(s) never ended, the first %s at %d", uuid, len(st), out[st[0]].Name, out[st[0]].TS)
		}
	}
	return out, nil
}

// noUnknown fails on any field the schema does not define: a field number
// sysray got wrong would otherwise decode as nothing, silently.
func noUnknown(m protoreflect.Message, path string) error {
	if u := m.GetUnknown(); len(u) > 0 {
		return fmt.Errorf("%s: %d bytes of fields the schema does not define", path, len(u))
	}
	var err error
	m.Range(func(f protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if f.Message() == nil || f.IsMap() {
			return true
		}
		p := path + "." + string(f.Name())
		if f.IsList() {
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = noUnknown(l.Get(i).Message(), p)
			}
		} else {
			err = noUnknown(v.Message(), p)
		}
		return err == nil
	})
	return err
}

func fd(d protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	f := d.Fields().ByName(protoreflect.Name(name))
	if f == nil {
		panic(errors.New("pftest: " + string(d.FullName()) + " has no field " + name))
	}
	return f
}

func has(m protoreflect.Message, name string) bool {
	return m.Has(fd(m.Descriptor(), name))
}

func strs(l protoreflect.List) []string {
	var out []string
	for i := 0; i < l.Len(); i++ {
		out = append(out, l.Get(i).String())
	}
	return out
}

func uints(l protoreflect.List) []uint64 {
	var out []uint64
	for i := 0; i < l.Len(); i++ {
		out = append(out, l.Get(i).Uint())
	}
	return out
}
