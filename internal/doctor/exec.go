package doctor

import (
	"fmt"
	"sort"

	"github.com/sysray/sysray/internal/event"
)

// execFail finds processes that tried to run a program and never could: every
// execve failed and the process then exited with an error, as a container
// whose entrypoint is missing or not executable does, over and over. A shell
// that tries each directory of $PATH fails a few execve calls too, then one
// succeeds: that is not reported.
type execFail struct {
	arch  event.Arch
	procs map[uint32]*execTries
	found []execFailure
}

type execTries struct {
	comm   string
	failed []string // the failed calls, formatted
	errnos map[string]bool
	ok     bool
}

type execFailure struct {
	pid    uint32
	comm   string
	tries  []string
	errnos []string
	code   int
}

func newExecFail(arch event.Arch) *execFail {
	return &execFail{arch: arch, procs: map[uint32]*execTries{}}
}

func (x *execFail) Observe(e *event.Event) {
	switch e.Kind {
	case event.KindSyscall:
		name := event.SyscallName(x.arch, e.Syscall.Nr)
		if name != "execve" && name != "execveat" || e.Syscall.Unfinished {
			return
		}
		t := x.procs[e.PID]
		if t == nil {
			t = &execTries{comm: e.Comm, errnos: map[string]bool{}}
			x.procs[e.PID] = t
		}
		if !e.Syscall.Failed() {
			t.ok = true
			return
		}
		if len(t.failed) < 8 {
			t.failed = append(t.failed, event.FormatSyscall(x.arch, &e.Syscall))
		}
		t.errnos[event.ErrnoName(int(-e.Syscall.Ret))] = true
	case event.KindExec:
		if t := x.procs[e.PID]; t != nil {
			t.ok = true
		}
	case event.KindExit:
		if !e.Proc.GroupDead {
			return
		}
		t := x.procs[e.PID]
		delete(x.procs, e.PID)
		code, sig, _ := e.Proc.Status()
		if t == nil || t.ok || len(t.failed) == 0 || (code == 0 && sig == 0) {
			return
		}
		var errnos []string
		for e := range t.errnos {
			errnos = append(errnos, e)
		}
		sort.Strings(errnos)
		x.found = append(x.found, execFailure{pid: e.PID, comm: t.comm, tries: t.failed, errnos: errnos, code: code})
	}
}

func (x *execFail) Findings(env *Env) []Finding {
	if len(x.found) == 0 {
		return nil
	}
	first := x.found[0]
	var procs []string
	for i, f := range x.found {
		if i == 8 {
			break
		}
		procs = append(procs, fmt.Sprintf("%s: exit %d", env.ProcName(f.pid, f.comm), f.code))
	}
	return []Finding{{
		ID:       "exec-failure",
		Severity: Warning,
		Title:    fmt.Sprintf("%d process(es) could not run their program and exited", len(x.found)),
		Summary: fmt.Sprintf("%s tried %d time(s) to execute a program and every attempt failed (%v), then exited with status %d. "+
			"Nothing of the program ever ran, so it left no log: a missing or non-executable binary, a bad interpreter line (#!), "+
			"or a library path that does not exist in this image.", env.ProcName(first.pid, first.comm), len(first.tries),
			first.errnos, first.code),
		Evidence: map[string]any{"processes": procs, "attempts": first.tries, "errnos": first.errnos},
		Fix: "Check the path and permissions of the program (and of its #! interpreter) inside the process's root or image: " +
			"ENOENT means missing, EACCES not executable or on a noexec mount, ENOEXEC not a binary this kernel can run.",
		Score: float64(len(x.found)) * 1e8,
	}}
}
