// Command trim copies a capture, keeping in its header only the processes
// its events name. `sysray record` stores the table of every process on the
// host when it began; a capture committed as test data needs none of them,
// and would publish whatever the recording host ran.
//
//	go run ./internal/doctor/testdata/trim IN OUT
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/proc"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: trim IN OUT")
		os.Exit(2)
	}
	if err := trim(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "trim:", err)
		os.Exit(1)
	}
}

func trim(in, out string) error {
	r, err := capture.Open(in)
	if err != nil {
		return err
	}
	defer r.Close()
	var events []event.Event
	named := map[uint32]bool{}
	for {
		var e event.Event
		if err := r.Next(&e); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
		named[e.PID] = true
		events = append(events, e)
	}
	t := r.Trailer()
	if t == nil {
		return fmt.Errorf("%s has no trailer: the recording did not finish", in)
	}
	h := *r.Header()
	var kept []proc.Info
	for _, p := range h.Procs {
		if named[p.PID] {
			kept = append(kept, p)
		}
	}
	h.Procs = kept
	w, err := capture.Create(out, &h)
	if err != nil {
		return err
	}
	for i := range events {
		if err := w.Write(&events[i]); err != nil {
			w.Close(nil)
			return err
		}
	}
	return w.Close(&capture.Trailer{Drops: t.Drops, End: t.End})
}
