// Command sysray finds and explains the time and failures that live between
// a program and the kernel.
package main

import (
	"errors"
	"fmt"
	"os"

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
		fmt.Fprintln(os.Stderr, "sysray: "+err.Error())
		os.Exit(1)
	}
}

// exitError carries a traced command's exit status out through cobra.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }
