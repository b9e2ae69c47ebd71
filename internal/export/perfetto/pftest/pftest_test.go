package pftest

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// The checks must catch what trace_processor would reject or misread.

func msg(fields ...func([]byte) []byte) []byte {
	var b []byte
	for _, f := range fields {
		b = f(b)
	}
	return b
}

func varint(n protowire.Number, v uint64) func([]byte) []byte {
	return func(b []byte) []byte {
		b = protowire.AppendTag(b, n, protowire.VarintType)
		return protowire.AppendVarint(b, v)
	}
}

func sub(n protowire.Number, m []byte) func([]byte) []byte {
	return func(b []byte) []byte {
		b = protowire.AppendTag(b, n, protowire.BytesType)
		return protowire.AppendBytes(b, m)
	}
}

func str(n protowire.Number, s string) func([]byte) []byte { return sub(n, []byte(s)) }

func fixed(n protowire.Number, v uint64) func([]byte) []byte {
	return func(b []byte) []byte {
		b = protowire.AppendTag(b, n, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, v)
	}
}

func trace(packets ...[]byte) []byte {
	var b []byte
	for _, p := range packets {
		b = sub(1, p)(b)
	}
	return b
}

var (
	thread = msg(varint(10, 1), sub(60, msg(varint(1, 7), sub(4, msg(varint(1, 1), varint(2, 1), str(5, "t"))))))
	clear  = msg(varint(10, 1), varint(13, 1))
)

func ev(ts uint64, typ uint64, extra ...func([]byte) []byte) []byte {
	te := msg(append([]func([]byte) []byte{varint(9, typ), varint(11, 7), str(23, "x")}, extra...)...)
	return msg(varint(8, ts), varint(10, 1), varint(13, 2), sub(11, te))
}

func TestChecks(t *testing.T) {
	good := trace(clear, thread, ev(10, 1), ev(20, 3), ev(30, 2))
	tr, err := Decode(good)
	if err != nil {
		t.Fatal(err)
	}
	sl, err := tr.Slices()
	if err != nil || len(sl) != 2 || sl[0].Dur != 20 || sl[1].Depth != 1 {
		t.Fatalf("good trace: %v %+v", err, sl)
	}
	for _, c := range []struct {
		name, want string
		b          []byte
		decodes    bool
	}{
		{"field the schema lacks", "does not define", trace(clear, msg(varint(10, 1), varint(9999, 1))), false},
		{"interned name never defined", "before it was defined", trace(clear, thread, ev(10, 3, varint(10, 5))), false},
		{"interned data before clearing", "before the sequence's state was cleared",
			trace(thread, msg(varint(10, 1), sub(12, msg(sub(2, msg(varint(1, 1), str(2, "n"))))))), false},
		{"interning without the flag", "without SEQ_NEEDS_INCREMENTAL_STATE",
			trace(clear, msg(varint(8, 5), varint(10, 1), sub(12, msg(sub(2, msg(varint(1, 1), str(2, "n"))))), sub(11, msg(varint(9, 3), varint(11, 7), varint(10, 1)))), thread), false},
		{"end with nothing open", "no slice open", trace(clear, thread, ev(10, 2)), true},
		{"slice left open", "never ended", trace(clear, thread, ev(10, 1), ev(20, 1), ev(30, 2)), true},
		{"undescribed track", "undescribed track", trace(clear, ev(10, 3)), true},
		{"flow that ends before it begins", "without having begun",
			trace(clear, thread, ev(10, 3, fixed(48, 9)), ev(20, 3, fixed(47, 9))), true},
	} {
		tr, err := Decode(c.b)
		if err == nil && c.decodes {
			_, err = tr.Slices()
		} else if err == nil {
			t.Errorf("%s: decoded", c.name)
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// Which clock a timestamp is in comes from the packet, else the sequence's
// defaults, else the trace's clock; one no snapshot ties to the trace's
// clock is what trace_processor drops.
func TestClocks(t *testing.T) {
	clock := func(id, ts uint64) func([]byte) []byte { return sub(1, msg(varint(1, id), varint(2, ts))) }
	snapshot := func(parts ...func([]byte) []byte) []byte { return msg(varint(10, 1), sub(6, msg(parts...))) }
	monoDefaults := msg(varint(10, 1), varint(13, 1), sub(59, msg(varint(58, ClockMonotonic))))
	at := func(clk uint64, b []byte) []byte { return append(b, msg(varint(58, clk))...) }

	tr, err := Decode(trace(monoDefaults, snapshot(clock(ClockMonotonic, 5), clock(ClockRealtime, 105), varint(2, ClockMonotonic)),
		thread, ev(10, 3), at(ClockRealtime, ev(20, 3))))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Clock != ClockMonotonic || tr.Events[0].Clock != ClockMonotonic || tr.Events[1].Clock != ClockRealtime {
		t.Errorf("trace clock %d, events' %d and %d; want MONOTONIC, MONOTONIC from the defaults, REALTIME from the packet",
			tr.Clock, tr.Events[0].Clock, tr.Events[1].Clock)
	}
	tr, err = Decode(trace(clear, thread, ev(10, 3)))
	if err != nil || tr.Clock != ClockBoottime || tr.Events[0].Clock != ClockBoottime {
		t.Errorf("without clocks: %v; want BOOTTIME, Perfetto's default", err)
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"MONOTONIC times and no snapshot", trace(monoDefaults, thread, ev(10, 3))},
		{"MONOTONIC times, a BOOTTIME trace, a snapshot without BOOTTIME",
			trace(monoDefaults, snapshot(clock(ClockMonotonic, 5), clock(ClockRealtime, 105)), thread, ev(10, 3))},
		{"a packet's own clock unrelated", trace(clear, thread, at(ClockMonotonic, ev(10, 3)))},
	} {
		if _, err := Decode(c.b); err == nil || !strings.Contains(err.Error(), "no clock snapshot relates") {
			t.Errorf("%s: got %v, want the clock refused", c.name, err)
		}
	}
}
