package main

import (
	"io"
	"os"
)

// openOutput returns stdout, or the file named by -o (created 0600: it holds
// paths and arguments).
func openOutput(path string) (io.Writer, func() error, error) {
	if path == "" || path == "-" {
		return os.Stdout, func() error { return nil }, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, nil, err
	}
	return f, f.Close, nil
}
