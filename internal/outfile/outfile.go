// Package outfile opens the files sysray writes (captures, reports, flame
// graphs, listings) so that writing one can neither be turned against
// another file nor destroy the one it replaces before there is something
// to replace it with.
//
// A File is a temporary file, 0600, in the target's directory; Commit
// renames it over the target. A rename replaces the name, never what a
// symlink at that name points to, so root writing into a directory another
// user can write to cannot be made to truncate or chmod a file of root's
// (with fs.protected_symlinks=0, O_CREAT|O_TRUNC would follow the link).
// Until Commit, the file at the target's name is untouched: a command that
// fails first leaves it as it was. Creating the temporary file also proves,
// before any work, that the directory can be written.
package outfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// File is an output being written. It is not safe for concurrent use.
type File struct {
	*os.File // the temporary file, then the target once committed
	path     string
	tmp      string
	inputs   []string
	done     bool // renamed into place
	closed   bool
}

// Create checks that path may be written and opens a temporary file beside
// it. It refuses a path that is a symlink or anything but a regular file, a
// path that is one of inputs (the same file by any name: writing it would
// destroy what the command reads), and a file another sysray is still
// writing. Errors name path, not the temporary file.
func Create(path string, inputs ...string) (*File, error) {
	if err := check(path, inputs); err != nil {
		return nil, err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if len(base) > 200 {
		base = base[:200] // room for the suffix within NAME_MAX
	}
	f, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, cause(err))
	}
	// A shared lock would let two writers agree; an exclusive one held for
	// the whole write is what tells a second writer to stay away.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// CreateTemp makes it 0600 already; outputs hold other processes'
	// arguments and paths, so that is not left to a default.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("%s: %w", path, cause(err))
	}
	return &File{File: f, path: path, tmp: f.Name(), inputs: inputs}, nil
}

// Check says now whether Create(path, inputs...) would succeed, without
// opening anything: the checks Create makes of path, and whether its
// directory can be written (access(2), which a read-only file system
// fails too). For a command that writes only at its end yet must start
// at once even where every open waits (the doctor on a host whose audit
// backlog is full, where each of its opens is audited). "" and "-" are
// standard output.
func Check(path string, inputs ...string) error {
	if path == "" || path == "-" {
		return nil
	}
	if err := check(path, inputs); err != nil {
		return err
	}
	if err := unix.Access(filepath.Dir(path), unix.W_OK); err != nil {
		return fmt.Errorf("%s: %w", path, cause(err))
	}
	return nil
}

// Name is the path the file is written to, not its temporary name.
func (f *File) Name() string { return f.path }

// Commit renames the file into place. Writing may go on after it (a
// capture is committed once tracing has begun, so that a sysray killed
// later leaves its events at the name asked for). The target is checked
// again first: it may have changed since Create.
func (f *File) Commit() error {
	if f.done {
		return nil
	}
	if err := check(f.path, f.inputs); err != nil {
		return err
	}
	if err := os.Rename(f.tmp, f.path); err != nil {
		return fmt.Errorf("%s: %w", f.path, cause(err))
	}
	f.done = true
	return nil
}

// Finish commits the file and closes it: the end of a successful write.
func (f *File) Finish() error {
	if err := f.Commit(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Close closes the file; later calls do nothing. Uncommitted, it is
// removed, and the target keeps what it held: deferred, Close undoes a
// write that did not reach Finish. Committed, Close reports an error if
// the name no longer leads to this file: another writer renamed its own
// file over it, and what was written here is lost.
func (f *File) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	if !f.done {
		err := f.File.Close()
		os.Remove(f.tmp)
		return err
	}
	mine, err := f.File.Stat()
	cerr := f.File.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", f.path, err)
	}
	if cur, err := os.Lstat(f.path); err != nil || !os.SameFile(mine, cur) {
		return fmt.Errorf("%s was replaced or removed while this sysray wrote it (another writer's rename?); what this one wrote is lost", f.path)
	}
	if cerr != nil {
		return fmt.Errorf("%s: %w", f.path, cause(cerr))
	}
	return nil
}

// check refuses a target that is not a regular file or absent, that is one
// of inputs, or that another sysray holds.
func check(path string, inputs []string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, cause(err))
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symbolic link: refusing to write through it (remove it, or name the file it points to; - is standard output)", path)
	case fi.IsDir():
		return fmt.Errorf("%s is a directory, not a regular file", path)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file (%s); use - for standard output", path, kind(fi.Mode()))
	}
	for _, in := range inputs {
		if in == "" || in == "-" {
			continue
		}
		if ii, err := os.Stat(in); err == nil && os.SameFile(fi, ii) {
			if in == path {
				return fmt.Errorf("%s is also an input of this command: writing it would destroy what is being read", path)
			}
			return fmt.Errorf("%s is also an input of this command (%s): writing it would destroy what is being read", path, in)
		}
	}
	return held(path)
}

// held reports a file another sysray is writing (it holds an exclusive
// lock on it until it closes the file).
func held(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	defer unix.Close(fd)
	err = unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return fmt.Errorf("%s is being written by another sysray; wait for it to finish or write elsewhere", path)
	}
	if err == nil {
		unix.Flock(fd, unix.LOCK_UN)
	}
	return nil
}

// SamePath reports whether a and b name the same file, whether or not it
// exists yet: their directories resolved (symlinks, "..") and their last
// elements equal, or both existing as one file.
func SamePath(a, b string) bool {
	if ai, err := os.Stat(a); err == nil {
		if bi, err := os.Stat(b); err == nil {
			return os.SameFile(ai, bi)
		}
	}
	return resolved(a) == resolved(b)
}

func resolved(p string) string {
	p, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	dir, base := filepath.Split(p)
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	return filepath.Join(dir, base)
}

// cause strips the temporary file's name from a *PathError or *LinkError,
// so that errors name the output asked for.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a regular file"
}
