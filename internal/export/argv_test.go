package export

import (
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// An exec whose command line was cut says so; a whole one does not.
func TestExecArgvTruncated(t *testing.T) {
	for _, cut := range []bool{true, false} {
		evs := []event.Event{{Kind: event.KindExec, Time: 100, PID: 7, TID: 7, Comm: "sh",
			Proc: event.Proc{Filename: "/bin/sh", Argv: []string{"sh", "-c", "xx"}, ArgvTruncated: cut}}}
		var r recorder
		if _, err := Export(source(evs), &r, Options{RateBucket: DefaultRateBucket}); err != nil {
			t.Fatal(err)
		}
		found, marked := false, false
		for _, it := range r.items {
			if it.Name != "exec" {
				continue
			}
			found = true
			for _, a := range it.Args {
				if a.Name == "argv" && a.Str != "sh -c xx" {
					t.Errorf("argv %q", a.Str)
				}
				if a.Name == "argv_truncated" {
					marked = a.Bool
				}
			}
		}
		if !found || marked != cut {
			t.Errorf("cut %v: exec found %v, marked %v", cut, found, marked)
		}
	}
}
