// Package launch starts the command sysray traces so that tracing begins
// exactly at its execve: nothing of sysray's own start-up is seen, and every
// syscall of the command, the execve included, is.
package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
)

// HelperArg is the hidden first argument that turns the sysray binary into
// the waiting child. main must call MaybeHelper before anything else.
const HelperArg = "__sysray_exec"

// Start starts argv in a child that waits, then calls expect with its pid and
// lets it exec. The child shares sysray's stdin and stderr; its stdout is
// stdout, or os.Stdout when nil.
func Start(argv []string, stdout io.Writer, expect func(pid uint32) error) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command to run")
	}
	// Resolve here so "not found" is sysray's clear error, not the child's.
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, fmt.Errorf("cannot run %s: %w", argv[0], err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// gate: parent to child, "exec now". ready: child to parent, "my own
	// exec is over". The kernel may report the helper's exec after
	// cmd.Start returns; selecting the pid before "ready" would trace the
	// helper instead of the command.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	rr, rw, err := os.Pipe()
	if err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	cmd := exec.Command(self, append([]string{HelperArg}, argv...)...)
	cmd.Args[0] = argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if stdout != nil {
		cmd.Stdout = stdout
	}
	cmd.ExtraFiles = []*os.File{r, rw}
	// The helper execs the command in place, and the parent-death signal
	// survives that exec: the command ends with sysray, as in live.Run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	r.Close()
	rw.Close()
	if err != nil {
		w.Close()
		rr.Close()
		return nil, err
	}
	var b [1]byte
	n, _ := rr.Read(b[:])
	rr.Close()
	if n != 1 {
		w.Close()
		cmd.Wait()
		return nil, errors.New("the command's launcher exited before it could run the command")
	}
	if err := expect(uint32(cmd.Process.Pid)); err != nil {
		w.Close() // the child sees EOF and exits without running the command
		cmd.Wait()
		return nil, err
	}
	if _, err := w.Write([]byte{1}); err != nil {
		w.Close()
		cmd.Wait()
		return nil, err
	}
	w.Close()
	return cmd, nil
}

// MaybeHelper runs the waiting child when os.Args asks for it, and never
// returns in that case.
func MaybeHelper() {
	if len(os.Args) < 3 || os.Args[1] != HelperArg {
		return
	}
	argv := os.Args[2:]
	gate := os.NewFile(3, "gate")
	ready := os.NewFile(4, "ready")
	var b [1]byte
	if _, err := ready.Write([]byte{1}); err != nil {
		os.Exit(127)
	}
	ready.Close()
	if n, _ := gate.Read(b[:]); n != 1 {
		os.Exit(127)
	}
	gate.Close()
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "sysray: cannot run %s: %v\n", argv[0], err)
		os.Exit(127)
	}
	err = syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "sysray: cannot run %s: %v\n", argv[0], err)
	os.Exit(126)
}

// ExitCode maps a finished command to the status a shell would give it.
func ExitCode(state *os.ProcessState) int {
	if state == nil {
		return 1
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return state.ExitCode()
}
