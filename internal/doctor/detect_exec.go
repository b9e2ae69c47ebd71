package doctor

import (
	"fmt"
	"sort"

	"github.com/sysray/sysray/internal/event"
)

// The finding it reports.
const (
	ExecFailure ID = "exec-failure"
)

func init() {
	register(registration{ids: []ID{ExecFailure},
		build: func(h *Host) Detector { return newExecFail(h.Arch) }})
}

// execFail finds processes that tried to run a program and never could: the
// execve calls after the process's last successful one all failed, and the
// process then exited with an error, as a container whose entrypoint is
// missing or not executable does, over and over, or a shell's `exec "$@"`.
// A shell that tries each directory of $PATH fails a few execve calls too,
// then one succeeds: that is not reported.
//
// Events may come out of order (syscalls are staged per CPU, exits are
// not), so the verdict waits for the report: each failure and success keeps
// its time, and an error exit its own.
type execFail struct {
	arch  event.Arch
	procs map[uint32]*execTries
	exits map[uint32]execExit // error exits only
}

type execTries struct {
	comm   string
	failed []execTry
	lastOK uint64 // entry time of the last successful exec
}

type execTry struct {
	at    uint64
	call  string
	errno string
}

type execExit struct {
	at   uint64
	comm string
	code int
}

type execFailure struct {
	pid    uint32
	comm   string
	tries  []string
	errnos []string
	code   int
}

func newExecFail(arch event.Arch) *execFail {
	return &execFail{arch: arch, procs: map[uint32]*execTries{}, exits: map[uint32]execExit{}}
}

func (x *execFail) tries(e *event.Event) *execTries {
	t := x.procs[e.PID]
	if t == nil {
		t = &execTries{comm: e.Comm}
		x.procs[e.PID] = t
	}
	return t
}

func (x *execFail) Observe(e *event.Event) {
	switch e.Kind {
	case event.KindSyscall:
		name := event.SyscallName(x.arch, e.Syscall.Nr)
		if name != "execve" && name != "execveat" || e.Syscall.Unfinished {
			return
		}
		t := x.tries(e)
		if !e.Syscall.Failed() {
			t.lastOK = max(t.lastOK, e.Time)
			return
		}
		if len(t.failed) < 64 {
			t.failed = append(t.failed, execTry{e.Time, event.FormatSyscall(x.arch, &e.Syscall), event.ErrnoName(int(-e.Syscall.Ret))})
		}
	case event.KindExec:
		t := x.tries(e)
		t.lastOK = max(t.lastOK, e.Time)
	case event.KindExit:
		if !e.Proc.GroupDead {
			return
		}
		code, sig, _ := e.Proc.Status()
		if code == 0 && sig == 0 {
			delete(x.procs, e.PID)
			return
		}
		x.exits[e.PID] = execExit{at: e.Time, comm: e.Comm, code: code}
	}
}

// failures are the processes whose last exec attempts all failed before
// they exited with an error.
func (x *execFail) failures() []execFailure {
	var out []execFailure
	for pid, ex := range x.exits {
		t := x.procs[pid]
		if t == nil {
			continue
		}
		var tries []string
		errnos := map[string]bool{}
		for _, f := range t.failed {
			if f.at > t.lastOK && f.at <= ex.at {
				if len(tries) < 8 {
					tries = append(tries, f.call)
				}
				errnos[f.errno] = true
			}
		}
		if len(tries) == 0 {
			continue
		}
		var names []string
		for e := range errnos {
			names = append(names, e)
		}
		sort.Strings(names)
		out = append(out, execFailure{pid: pid, comm: t.comm, tries: tries, errnos: names, code: ex.code})
	}
	sort.Slice(out, func(i, j int) bool { return x.exits[out[i].pid].at < x.exits[out[j].pid].at })
	return out
}

func (x *execFail) Findings(env *Env) []Finding {
	found := x.failures()
	if len(found) == 0 {
		return nil
	}
	first := found[0]
	var procs []string
	for i, f := range found {
		if i == 8 {
			break
		}
		procs = append(procs, fmt.Sprintf("%s: exit %d", env.ProcName(f.pid, f.comm), f.code))
	}
	var pids []uint32
	for _, f := range found {
		pids = append(pids, f.pid)
	}
	return []Finding{{
		ID:       ExecFailure,
		Procs:    env.refs(pids...),
		Key:      keyOf(),
		Severity: Warning,
		Title:    fmt.Sprintf("%d process(es) could not run their program and exited", len(found)),
		Summary: fmt.Sprintf("%s tried %d time(s) to execute a program and every attempt failed (%v), then exited with status %d. "+
			"Nothing of the program ever ran, so it left no log: a missing or non-executable binary, a bad interpreter line (#!), "+
			"or a library path that does not exist in this image.", env.ProcName(first.pid, first.comm), len(first.tries),
			first.errnos, first.code),
		Evidence: map[string]any{"processes": procs, "attempts": first.tries, "errnos": first.errnos},
		Fix: "Check the path and permissions of the program (and of its #! interpreter) inside the process's root or image: " +
			"ENOENT means missing, EACCES not executable or on a noexec mount, ENOEXEC not a binary this kernel can run.",
		Score: float64(len(found)) * 1e8,
	}}
}
