package proc

import (
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// Exited processes stay until Prune passes their exit; a pid reused by a
// new process is not forgotten for its predecessor's exit.
func TestTablePrune(t *testing.T) {
	tb := NewTable([]Info{{PID: 1, Comm: "init"}})
	tb.Update(&event.Event{Kind: event.KindFork, Time: 10, PID: 1, TID: 1, Proc: event.Proc{ChildPID: 50, ChildTID: 50, ChildComm: "sh"}})
	tb.Update(&event.Event{Kind: event.KindExec, Time: 11, PID: 50, TID: 50, Comm: "ls", Proc: event.Proc{Filename: "/bin/ls", Argv: []string{"ls"}}})
	tb.Update(&event.Event{Kind: event.KindExit, Time: 20, PID: 50, TID: 50, Proc: event.Proc{GroupDead: true}})
	tb.Update(&event.Event{Kind: event.KindFork, Time: 21, PID: 1, TID: 1, Proc: event.Proc{ChildPID: 60, ChildTID: 60, ChildComm: "sh"}})
	tb.Update(&event.Event{Kind: event.KindExit, Time: 30, PID: 60, TID: 60, Proc: event.Proc{GroupDead: true}})
	tb.Update(&event.Event{Kind: event.KindFork, Time: 31, PID: 1, TID: 1, Proc: event.Proc{ChildPID: 60, ChildTID: 60, ChildComm: "sh2"}})
	if p, ok := tb.Get(50); !ok || p.Comm != "ls" {
		t.Fatalf("exited process not kept: %+v", p)
	}
	if n := tb.Prune(20); n != 0 {
		t.Errorf("pruned %d exited at or after 20", n)
	}
	if n := tb.Prune(25); n != 1 {
		t.Errorf("pruned %d, want 1 (pid 50)", n)
	}
	if _, ok := tb.Get(50); ok {
		t.Error("pid 50 still known")
	}
	tb.Prune(1000)
	if p, ok := tb.Get(60); !ok || p.Comm != "sh2" {
		t.Errorf("the reused pid 60 was forgotten for its predecessor's exit: %+v", p)
	}
	if all := tb.All(); len(all) != 2 {
		t.Errorf("All: %+v", all)
	}
}

// A snapshot that comes in after events (the agent reads it in the
// background) adds the processes the events did not name, and leaves
// those they did as the events made them.
func TestTableFill(t *testing.T) {
	tb := NewTable(nil)
	tb.Update(&event.Event{Kind: event.KindExec, Time: 11, PID: 50, TID: 50, Comm: "ls", Proc: event.Proc{Filename: "/bin/ls", Argv: []string{"ls"}}})
	tb.Fill([]Info{{PID: 1, Comm: "init", Exe: "/sbin/init"}, {PID: 50, Comm: "sh", Exe: "/bin/sh"}})
	if p, ok := tb.Get(1); !ok || p.Exe != "/sbin/init" {
		t.Errorf("pid 1 from the snapshot: %+v %v", p, ok)
	}
	if p, _ := tb.Get(50); p.Exe != "/bin/ls" || p.Comm != "ls" {
		t.Errorf("pid 50 is the exec's ls, not the older snapshot's sh: %+v", p)
	}
}

// Forget drops only processes that have ended: not the living, nor a pid
// a new process took since.
func TestTableForget(t *testing.T) {
	tb := NewTable([]Info{{PID: 1, Comm: "init"}})
	for _, pid := range []uint32{50, 60} {
		tb.Update(&event.Event{Kind: event.KindFork, Time: 10, PID: 1, TID: 1, Proc: event.Proc{ChildPID: pid, ChildTID: pid, ChildComm: "sh"}})
		tb.Update(&event.Event{Kind: event.KindExit, Time: 20, PID: pid, TID: pid, Proc: event.Proc{GroupDead: true}})
	}
	tb.Update(&event.Event{Kind: event.KindFork, Time: 21, PID: 1, TID: 1, Proc: event.Proc{ChildPID: 60, ChildTID: 60, ChildComm: "sh2"}})
	tb.Forget(map[uint32]bool{1: true, 50: true, 60: true})
	if _, ok := tb.Get(50); ok {
		t.Error("ended pid 50 still known")
	}
	if p, ok := tb.Get(60); !ok || p.Comm != "sh2" {
		t.Errorf("pid 60, used again, forgotten: %+v", p)
	}
	if _, ok := tb.Get(1); !ok {
		t.Error("living pid 1 forgotten")
	}
}
