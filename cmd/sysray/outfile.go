package main

import (
	"io"
	"os"

	"github.com/sysray/sysray/internal/outfile"
)

// outFile is where a command writes: standard output for "" and "-", else a
// file opened by outfile (0600: it holds paths and arguments), which takes
// its name's place only at commit or finish.
type outFile struct {
	io.Writer
	f *outfile.File
}

// openOutput opens the output named path, refusing one of inputs.
func openOutput(path string, inputs ...string) (*outFile, error) {
	if path == "" || path == "-" {
		return &outFile{Writer: os.Stdout}, nil
	}
	f, err := outfile.Create(path, inputs...)
	if err != nil {
		return nil, err
	}
	return &outFile{Writer: f, f: f}, nil
}

// commit puts the file in place while writing goes on.
func (o *outFile) commit() error {
	if o.f == nil {
		return nil
	}
	return o.f.Commit()
}

// finish puts the file in place and closes it.
func (o *outFile) finish() error {
	if o.f == nil {
		return nil
	}
	return o.f.Finish()
}

// close closes the file, removing it unless it was committed; deferred, it
// undoes a command that failed before finish.
func (o *outFile) close() {
	if o.f != nil {
		o.f.Close()
	}
}
