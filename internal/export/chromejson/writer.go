package chromejson

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sysray/sysray/internal/export"
)

// Writer is an export.Sink that writes the Trace Event Format.
type Writer struct {
	w     *bufio.Writer
	b     []byte
	first bool
}

// NewWriter returns a Writer that writes to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 256<<10), first: true}
}

// laneTID is the made-up thread id of a lane. The format has no child
// tracks, so a thread's overlapping calls go to threads of their own, with
// ids no Linux thread has (pid_max is at most 2^22).
func laneTID(tid uint32, lane int) uint64 {
	return 1<<30 + uint64(min(lane, 255))<<22 + uint64(tid)
}

// tid is the "tid" a track's events carry.
func tid(t *export.Track) uint64 {
	switch t.Kind {
	case export.TrackLane:
		return laneTID(t.TID, t.Lane)
	case export.TrackThread:
		return uint64(t.TID)
	}
	return uint64(t.PID)
}

// Begin writes the document's head and names every process and thread.
func (w *Writer) Begin(h export.Header, tracks []*export.Track) error {
	b := w.b[:0]
	b = append(b, `{"displayTimeUnit":"ns","otherData":{"generator":"sysray","clock":"CLOCK_MONOTONIC","boot_time_unix_ns":"`...)
	b = strconv.AppendInt(b, h.BootTime, 10)
	b = append(b, `","rate_bucket_ns":"`...)
	b = strconv.AppendUint(b, h.RateBucket, 10)
	b = append(b, `"},"traceEvents":[`...)
	w.b = b
	if err := w.flush(); err != nil {
		return err
	}
	for _, t := range tracks {
		switch t.Kind {
		case export.TrackProcess:
			w.meta("process_name", t.PID, uint64(t.PID), "name", t.Name)
			if len(t.Labels) > 0 {
				w.meta("process_labels", t.PID, uint64(t.PID), "labels", strings.Join(t.Labels, ","))
			}
		case export.TrackThread, export.TrackLane:
			w.meta("thread_name", t.PID, tid(t), "name", t.Name)
		case export.TrackGlobal:
			w.meta("process_name", 0, 0, "name", t.Name)
		default:
			continue
		}
		if err := w.flush(); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) meta(name string, pid uint32, tid uint64, key, value string) {
	w.open("M", name, "__metadata", pid, tid)
	w.b = append(w.b, `,"args":{`...)
	w.b = appendString(w.b, key)
	w.b = append(w.b, ':')
	w.b = appendString(w.b, value)
	w.b = append(w.b, "}}"...)
}

// open starts an event object: it leaves the object open after pid and tid.
func (w *Writer) open(ph, name, cat string, pid uint32, tid uint64) {
	b := w.b
	if !w.first {
		b = append(b, ",\n"...)
	} else {
		b = append(b, '\n')
	}
	w.first = false
	b = append(b, `{"ph":"`...)
	b = append(b, ph...)
	b = append(b, `","name":`...)
	b = appendString(b, name)
	if cat != "" {
		b = append(b, `,"cat":`...)
		b = appendString(b, cat)
	}
	b = append(b, `,"pid":`...)
	b = strconv.AppendUint(b, uint64(pid), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendUint(b, tid, 10)
	w.b = b
}

// Item writes one event, and its flow events.
func (w *Writer) Item(it *export.Item) error {
	t := it.Track
	switch it.Kind {
	case export.Counter:
		w.open("C", t.Name, "", t.PID, uint64(t.PID))
		w.ts("ts", it.Time)
		w.b = append(w.b, `,"args":{`...)
		w.b = appendString(w.b, t.Unit)
		w.b = append(w.b, ':')
		w.b = strconv.AppendInt(w.b, it.Value, 10)
		w.b = append(w.b, "}}"...)
		return w.flush()
	case export.Slice:
		w.open("X", it.Name, it.Cat, t.PID, tid(t))
		w.ts("ts", it.Time)
		w.ts("dur", it.Dur)
	default:
		w.open("i", it.Name, it.Cat, t.PID, tid(t))
		w.ts("ts", it.Time)
		if t.Kind == export.TrackGlobal {
			w.b = append(w.b, `,"s":"g"`...)
		} else {
			w.b = append(w.b, `,"s":"t"`...)
		}
	}
	w.args(it.Args)
	w.b = append(w.b, '}')
	// Flow events bind to the slice around them, so they sit just inside
	// the item: a nanosecond after a slice begins (where a flow leaves), a
	// nanosecond before it ends (where one arrives, after its source began).
	flow := "wakeup"
	if it.Cat == "signal" {
		flow = "signal"
	}
	in := 0
	if it.Dur >= 2 {
		in = 1
	}
	for _, id := range it.FlowOut {
		w.flowEvent("s", flow, id, t, it.Time+uint64(in))
	}
	for _, id := range it.FlowIn {
		w.flowEvent("f", flow, id, t, it.Time+it.Dur-uint64(in))
	}
	return w.flush()
}

func (w *Writer) flowEvent(ph, name string, id uint64, t *export.Track, at uint64) {
	w.open(ph, name, "flow", t.PID, tid(t))
	w.ts("ts", at)
	w.b = append(w.b, `,"id":`...)
	w.b = strconv.AppendUint(w.b, id, 10)
	if ph == "f" {
		w.b = append(w.b, `,"bp":"e"`...)
	}
	w.b = append(w.b, '}')
}

// ts writes ns as microseconds with three decimals.
func (w *Writer) ts(key string, ns uint64) {
	b := append(w.b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	b = strconv.AppendUint(b, ns/1000, 10)
	b = append(b, '.')
	frac := ns % 1000
	b = append(b, byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	w.b = b
}

func (w *Writer) args(args []export.Arg) {
	if len(args) == 0 {
		return
	}
	b := append(w.b, `,"args":{`...)
	for i := range args {
		a := &args[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, a.Name)
		b = append(b, ':')
		switch a.Kind {
		case export.ArgInt:
			b = strconv.AppendInt(b, a.Int, 10)
		case export.ArgUint:
			b = strconv.AppendUint(b, a.Uint, 10)
		case export.ArgBool:
			b = strconv.AppendBool(b, a.Bool)
		default:
			b = appendString(b, a.Str)
		}
	}
	w.b = append(b, '}')
}

func (w *Writer) flush() error {
	_, err := w.w.Write(w.b)
	w.b = w.b[:0]
	return err
}

// End closes the document.
func (w *Writer) End() error {
	w.b = append(w.b[:0], "\n]}\n"...)
	if err := w.flush(); err != nil {
		return err
	}
	return w.w.Flush()
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string. Bytes that are not UTF-8 (comm,
// paths and argv are bytes on Linux) become U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
