// Package exporttest holds a small synthetic capture whose timeline is known
// exactly, for the tests of the export formats: two processes (one in a
// container), three threads, calls that succeed, fail, are refused, overlap
// (approximate times), are cut off, sleep and are woken by another thread's
// call, and a fault, a signal, an exec, exits and lost events among them.
package exporttest

import (
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/export"
	"github.com/sysray/sysray/internal/proc"
)

// T is the fixture's time origin, ns.
const T = 5_000_000_000

// PIDs and TIDs of the fixture.
const (
	Server = 100 // process and its main thread, in container "web"
	Worker = 101 // a second thread of Server
	Client = 200 // process and its only thread
)

// Syscall numbers (x86_64).
const (
	nrRead    = 0
	nrWrite   = 1
	nrExecve  = 59
	nrKill    = 62
	nrFutex   = 202
	nrOpenat  = 257
	nrClone3  = 435
	atFDCWD   = 0xffffffffffffff9c // -100
	sigterm   = 15
	futexWait = 0
)

func sys(tid, pid uint32, comm string, at, lat uint64, nr uint32, ret int64, args ...uint64) event.Event {
	e := event.Event{Kind: event.KindSyscall, Time: at, PID: pid, TID: tid, Comm: comm}
	e.Syscall.Nr, e.Syscall.Latency, e.Syscall.Ret = nr, lat, ret
	copy(e.Syscall.Args[:], args)
	return e
}

// Events is the capture, in the order a reader returns it (calls when they
// returned).
func Events() []event.Event {
	var evs []event.Event
	add := func(e event.Event) { evs = append(evs, e) }

	// The server's exec, stamped with its execve's entry time.
	add(event.Event{Kind: event.KindExec, Time: T - 100, PID: Server, TID: Server, Comm: "server", Cgroup: 5,
		Proc: event.Proc{Filename: "/srv/server", Argv: []string{"server", "--port", "80"}}})
	e := sys(Server, Server, "server", T-100, 150, nrExecve, 0, 0x1000, 0x2000, 0x3000)
	e.Syscall.Data[0] = []byte("/srv/server")
	add(e)

	e = sys(Server, Server, "server", T+1000, 500, nrOpenat, 3, atFDCWD, 0x4000, 0)
	e.Syscall.Data[1] = []byte("/etc/app.conf")
	add(e)
	// A fault inside a failing openat.
	add(event.Event{Kind: event.KindPageFault, Time: T + 2100, PID: Server, TID: Server, Comm: "server",
		Fault: event.Fault{Addr: 0x4000, IP: 0x401000, Error: 4}})
	e = sys(Server, Server, "server", T+2000, 300, nrOpenat, -2, atFDCWD, 0x5000, 0)
	e.Syscall.Data[1] = []byte("/nonexistent")
	add(e)

	// The server's write wakes the worker's futex wait.
	add(sys(Server, Server, "server", T+8000, 1000, nrWrite, 1, 1, 0x6000, 1))
	e = sys(Worker, Server, "worker", T+3000, 10000, nrFutex, 0, 0x7000, futexWait, 0)
	e.Syscall.Sleeps = []event.Sleep{{Duration: 9000, Count: 1, WakerPID: Server, WakerTID: Server, WakerComm: "server",
		Stack: []event.Frame{{Name: "schedule"}, {Name: "futex_wait"}}}}
	add(e)

	// Approximate times: three reads of the client overlap or touch.
	for _, r := range []struct{ at, lat uint64 }{{20000, 5000}, {22000, 1000}, {25000, 100}} {
		e = sys(Client, Client, "client", T+r.at, r.lat, nrRead, 0, 0, 0x8000, 16)
		e.Syscall.Approx = true
		add(e)
	}
	// A call a seccomp filter refused: no time at all.
	e = sys(Client, Client, "client", T+30000, 0, nrClone3, -38, 0x9000, 88)
	e.Syscall.Refused = true
	add(e)
	// The client kills the server.
	add(event.Event{Kind: event.KindSignalGenerate, Time: T + 31000, PID: Client, TID: Client, Comm: "client",
		Signal: event.Signal{Sig: sigterm, SenderPID: Client, TargetPID: Server, TargetTID: Server}})
	add(sys(Client, Client, "client", T+30900, 200, nrKill, 0, Server, sigterm))
	add(event.Event{Kind: event.KindSignalDeliver, Time: T + 32000, PID: Server, TID: Server, Comm: "server",
		Signal: event.Signal{Sig: sigterm}})

	// The worker is cut off inside its second wait, at the moment it exits.
	e = sys(Worker, Server, "worker", T+14000, 19000, nrFutex, 0, 0x7000, futexWait, 0)
	e.Syscall.Unfinished = true
	add(e)
	add(event.Event{Kind: event.KindExit, Time: T + 33000, PID: Server, TID: Worker, Comm: "worker",
		Proc: event.Proc{ExitCode: sigterm}})
	add(event.Event{Kind: event.KindExit, Time: T + 33000, PID: Server, TID: Server, Comm: "server",
		Proc: event.Proc{ExitCode: sigterm, GroupDead: true}})
	add(event.Event{Kind: event.KindDrop, Time: T + 40000, CPU: 1, Drop: event.Drop{Count: 7}})
	return evs
}

// Source is the fixture as an export source.
func Source() export.Source {
	evs := Events()
	return export.Source{
		Arch:     event.ArchAMD64,
		BootTime: 1_700_000_000_000_000_000,
		Procs:    []proc.Info{{PID: Client, Comm: "client", Cmdline: []string{"client", "-v"}}},
		Container: func(pid uint32, cg uint64) string {
			if cg == 5 {
				return "container web"
			}
			return ""
		},
		Events: func(fn func(*event.Event) error) error {
			for i := range evs {
				e := evs[i]
				if err := fn(&e); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// Known facts of the fixture that a test checks a format against.
const (
	Syscalls = 11 // execve, 2 openat, write, 2 futex, 3 read, clone3, kill
	// ServerSyscalls and ClientSyscalls are per process (the worker's are the server's).
	ServerSyscalls = 6
	ClientSyscalls = 5
	Lanes          = 1 // the client's second and third reads share one lane
)
