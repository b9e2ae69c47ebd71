package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var execVariants = []Variant{
	// exec-failure: a process whose every execve failed, which then exited
	// with an error. The unit test has one process, one execve, ENOENT, and
	// a $PATH search that ends in a successful exec (not reported).
	{Name: "exec-failure/eacces", Differs: "the entrypoint exists but lacks the execute bit: EACCES",
		Mode: Cmd, Argv: []string{"execfail", "-e", "eacces"}, Expect: execFailed("EACCES")},
	{Name: "exec-failure/interp-8-procs", Differs: "8 children, each running a script whose #! interpreter is missing (ENOENT on an existing file)",
		Mode: Cmd, Argv: []string{"execfail", "-e", "interp", "-n", "8"}, Expect: execFailed("ENOENT")},
	{Name: "exec-failure/path-search", Differs: "execvp over a $PATH of 8 directories: 8 failed execve in one process, none succeeds",
		Mode: Cmd, Argv: []string{"execfail", "-e", "path"}, Expect: execFailed("ENOENT")},
	{Name: "exec-failure/enoexec-thread", Differs: "a second thread execs a file that is neither ELF nor a script: ENOEXEC",
		Mode: Cmd, Argv: []string{"execfail", "-e", "enoexec", "-t"}, Expect: execFailed("ENOEXEC")},
	{Name: "exec-failure/exec-in-place", Differs: "no child: the process, started fine, execs a missing program in place (an entrypoint's exec \"$@\", bash -c CMD) and exits 127",
		Mode: Cmd, Argv: []string{"execfail", "-e", "enoent", "-x"}, Expect: execFailed("ENOENT")},
	{Name: "exec-failure/execveat-pid", Differs: "execveat(fd, \"\", AT_EMPTY_PATH) in a restart loop every 200 ms, already running; -p for 1.5 s",
		Mode: PID, Argv: []string{"execfail", "-e", "execveat", "-d", "30", "-i", "200"},
		Lead: 500 * time.Millisecond, For: 1500 * time.Millisecond, Expect: execFailed("EACCES")},
	{Name: "exec-failure/host", Differs: "a missing entrypoint in a restart loop every 200 ms, already running; the whole host for 1.5 s",
		Mode: Host, Argv: []string{"execfail", "-e", "enoent", "-d", "30", "-i", "200"},
		Lead: 500 * time.Millisecond, For: 1500 * time.Millisecond, Expect: execFailed("ENOENT")},
	{Name: "exec-failure/container", Differs: "a missing entrypoint in a restart loop every 200 ms in a container (containerd, runc), already running; --container for 1.5 s",
		Mode: InContainer, Container: &Container{}, Argv: []string{"execfail", "-e", "enoent", "-d", "30", "-i", "200"},
		Lead: 1500 * time.Millisecond, For: 1500 * time.Millisecond, Expect: execFailed("ENOENT")},
}

func execFailed(errno string) Expect {
	return Expect{IDs: []doctor.ID{doctor.ExecFailure}, Severity: doctor.Warning, Words: []string{errno}}
}
