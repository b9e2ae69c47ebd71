package chromejson_test

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/export"
	"github.com/sysray/sysray/internal/export/chromejson"
	"github.com/sysray/sysray/internal/export/exporttest"
)

// Event is one Trace Event Format record, as a viewer reads it.
type Event struct {
	Ph   string         `json:"ph"`
	Name string         `json:"name"`
	Cat  string         `json:"cat"`
	PID  uint64         `json:"pid"`
	TID  uint64         `json:"tid"`
	TS   json.Number    `json:"ts"`
	Dur  json.Number    `json:"dur"`
	S    string         `json:"s"`
	ID   uint64         `json:"id"`
	BP   string         `json:"bp"`
	Args map[string]any `json:"args"`
}

// ns turns microseconds with three decimals back into nanoseconds.
func ns(t *testing.T, n json.Number) uint64 {
	t.Helper()
	if n == "" {
		return 0
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(math.Round(f * 1000))
}

func decode(t *testing.T, b []byte) []Event {
	t.Helper()
	var doc struct {
		TraceEvents     []Event `json:"traceEvents"`
		DisplayTimeUnit string  `json:"displayTimeUnit"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	if doc.DisplayTimeUnit != "ns" || len(doc.TraceEvents) == 0 {
		t.Fatalf("document %+v", doc)
	}
	return doc.TraceEvents
}

func TestFixture(t *testing.T) {
	var b bytes.Buffer
	st, err := export.Export(exporttest.Source(), chromejson.NewWriter(&b), export.Options{})
	if err != nil {
		t.Fatal(err)
	}
	evs := decode(t, b.Bytes())

	names := map[[2]uint64]string{} // thread_name by pid, tid; process_name by pid, 0
	var labels string
	for _, e := range evs {
		if e.Ph != "M" {
			continue
		}
		switch e.Name {
		case "process_name":
			names[[2]uint64{e.PID, 0}] = e.Args["name"].(string)
		case "thread_name":
			names[[2]uint64{e.PID, e.TID}] = e.Args["name"].(string)
		case "process_labels":
			labels = e.Args["labels"].(string)
		}
	}
	lane := uint64(1<<30 + 1<<22 + exporttest.Client)
	for k, want := range map[[2]uint64]string{
		{exporttest.Server, 0}:                 "server [container web]",
		{exporttest.Client, 0}:                 "client",
		{exporttest.Server, exporttest.Server}: "server",
		{exporttest.Server, exporttest.Worker}: "worker",
		{exporttest.Client, exporttest.Client}: "client",
		{exporttest.Client, lane}:              "client 200: overlapping calls (lane 1)",
	} {
		if names[k] != want {
			t.Errorf("name of %v: %q, want %q", k, names[k], want)
		}
	}
	if labels != "container web" {
		t.Errorf("labels %q", labels)
	}

	// One event per syscall; slices nest on every thread.
	var calls int
	byName := map[string][]Event{}
	perThread := map[[2]uint64][]Event{}
	for _, e := range evs {
		byName[e.Name] = append(byName[e.Name], e)
		if e.Cat == "syscall" {
			calls++
		}
		if e.Ph == "X" || e.Ph == "i" {
			perThread[[2]uint64{e.PID, e.TID}] = append(perThread[[2]uint64{e.PID, e.TID}], e)
		}
	}
	if calls != exporttest.Syscalls || st.Slices != calls {
		t.Errorf("%d syscall events (stats %d), want %d", calls, st.Slices, exporttest.Syscalls)
	}
	for th, list := range perThread {
		slices.SortStableFunc(list, func(a, b Event) int { return int(ns(t, a.TS)) - int(ns(t, b.TS)) })
		var open []uint64 // ends of the enclosing slices
		for _, e := range list {
			at := ns(t, e.TS)
			// An instant at a slice's very end is still inside it.
			for len(open) > 0 && (open[len(open)-1] < at || open[len(open)-1] == at && e.Ph == "X") {
				open = open[:len(open)-1]
			}
			end := at + ns(t, e.Dur)
			if len(open) > 0 && end > open[len(open)-1] {
				t.Errorf("thread %v: %s [%d, %d] overlaps its enclosing slice ending %d", th, e.Name, at, end, open[len(open)-1])
			}
			if e.Ph == "X" {
				open = append(open, end)
			}
		}
	}
	op := byName["openat"]
	if len(op) != 2 || op[0].TS != "5000001.000" || op[0].Dur != "0.500" || op[0].Args["pathname"] != "/etc/app.conf" || op[0].Args["ret"] != json.Number("3") {
		t.Errorf("openat %+v", op)
	}
	if op[1].Args["errno"] != "ENOENT" {
		t.Errorf("failed openat %+v", op[1])
	}
	if c := byName["clone3"]; len(c) != 1 || c[0].Ph != "i" || c[0].Args["refused_by_seccomp"] != true {
		t.Errorf("refused call %+v", c)
	}
	if rd := byName["read"]; len(rd) != 3 || rd[0].TID != exporttest.Client || rd[1].TID != lane || rd[2].TID != lane {
		t.Errorf("reads %+v", rd)
	}

	// Flows: each arrival has its departure, earlier, with the same name.
	out := map[uint64]Event{}
	for _, e := range byName["wakeup"] {
		if e.Ph == "s" {
			out[e.ID] = e
		}
	}
	for _, e := range byName["signal"] {
		if e.Ph == "s" {
			out[e.ID] = e
		}
	}
	var arrivals int
	for _, name := range []string{"wakeup", "signal"} {
		for _, e := range byName[name] {
			if e.Ph != "f" {
				continue
			}
			arrivals++
			s, ok := out[e.ID]
			if !ok || s.Name != e.Name || ns(t, s.TS) > ns(t, e.TS) || e.BP != "e" {
				t.Errorf("flow %d: %+v from %+v", e.ID, e, s)
			}
		}
	}
	if arrivals != 2 || len(byName["wakeup"]) != 2 {
		t.Errorf("%d flows arrive, wakeup events %+v", arrivals, byName["wakeup"])
	}
	w := byName["wakeup"]
	if w[0].TID != exporttest.Server || w[1].TID != exporttest.Worker || ns(t, w[1].TS) != exporttest.T+13000-1 {
		t.Errorf("wakeup flow %+v", w)
	}

	// Counters add up to the calls.
	sum := map[uint64]int64{}
	for _, e := range byName["syscalls/s"] {
		v, _ := e.Args["calls/s"].(json.Number).Int64()
		sum[e.PID] += v
	}
	if sum[exporttest.Server] != exporttest.ServerSyscalls*100 || sum[exporttest.Client] != exporttest.ClientSyscalls*100 {
		t.Errorf("rates %v", sum)
	}
}

// Bytes that are not UTF-8 (a comm or a path is bytes on Linux) still make
// valid JSON, and quotes and control characters are escaped.
func TestStrings(t *testing.T) {
	src := exporttest.Source()
	src.Events = func(fn func(*event.Event) error) error {
		e := event.Event{Kind: event.KindSyscall, Time: 1000, PID: 7, TID: 7, Comm: "bad\xffname\"\n"}
		e.Syscall.Nr, e.Syscall.Latency = 257, 10
		e.Syscall.Data[1] = []byte("/tmp/\x01\"quoted\"\\\xfe")
		return fn(&e)
	}
	var b bytes.Buffer
	if _, err := export.Export(src, chromejson.NewWriter(&b), export.Options{}); err != nil {
		t.Fatal(err)
	}
	evs := decode(t, b.Bytes())
	var found bool
	for _, e := range evs {
		if e.Name == "openat" {
			found = true
			if e.Args["pathname"] != "/tmp/\x01\"quoted\"\\\ufffd" {
				t.Errorf("path %q", e.Args["pathname"])
			}
		}
		if e.Name == "thread_name" && e.Args["name"] != "bad\ufffdname\"\n" {
			t.Errorf("thread name %q", e.Args["name"])
		}
	}
	if !found {
		t.Error("no openat")
	}
}

// The format has no clock: ts is the capture's CLOCK_MONOTONIC in
// microseconds, counted from boot, and the document says so, with the Unix
// time of that zero.
func TestClock(t *testing.T) {
	var b bytes.Buffer
	if _, err := export.Export(exporttest.Source(), chromejson.NewWriter(&b), export.Options{}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OtherData map[string]string `json:"otherData"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OtherData["clock"] != "CLOCK_MONOTONIC" || doc.OtherData["boot_time_unix_ns"] != "1700000000000000000" {
		t.Errorf("otherData %v, want the clock and the fixture's boot time", doc.OtherData)
	}
	for _, e := range decode(t, b.Bytes()) {
		if e.Ph == "X" && e.Name == "openat" && e.Args["pathname"] == "/etc/app.conf" {
			if got := ns(t, e.TS); got != exporttest.T+1000 {
				t.Errorf("openat at ts %s, want %d ns, its CLOCK_MONOTONIC time", e.TS, exporttest.T+1000)
			}
			return
		}
	}
	t.Fatal("no openat of /etc/app.conf")
}
