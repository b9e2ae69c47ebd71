// Command sysray finds and explains the time and failures that live between
// a program and the kernel.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sysray/sysray/internal/launch"
)

func main() {
	launch.MaybeHelper()
	root := newRoot()
	if err := root.Execute(); err != nil {
		var ex *exitError
		if errors.As(err, &ex) {
			os.Exit(ex.code)
		}
		if errors.Is(err, syscall.EPIPE) {
			brokenPipe()
		}
		fmt.Fprintln(os.Stderr, "sysray: "+err.Error())
		os.Exit(1)
	}
}

// brokenPipe ends sysray as a write to a pipe with no reader ends cat or
// grep: quietly, killed by SIGPIPE, so that a shell pipeline such as
// sysray trace | head sees the status it expects. sysray has by then ended
// the command it traced and closed its probe.
func brokenPipe() {
	signal.Reset(syscall.SIGPIPE)
	syscall.Kill(os.Getpid(), syscall.SIGPIPE)
	os.Exit(128 + int(syscall.SIGPIPE)) // SIGPIPE blocked or ignored by whoever started sysray
}

// exitError carries a traced command's exit status out through cobra.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }
