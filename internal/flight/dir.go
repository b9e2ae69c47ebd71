package flight

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sysray/sysray/internal/capture"
)

// Defaults for OpenDir's zero arguments.
const (
	DefaultDirBytes = 512 << 20
	DefaultDirFiles = 100
)

const (
	ext        = ".sysray"
	timeLayout = "20060102T150405Z"
	// A temporary file this old belongs to a writer that died; a live
	// snapshot takes seconds.
	staleTmp = time.Hour
	// Each part of a name is cut to this, keeping names readable and far
	// from NAME_MAX.
	maxPart = 64
)

// ErrNotFound is returned by Open for a name that is not one of the
// directory's captures.
var ErrNotFound = errors.New("flight: no such capture")

// Dir is a directory of flight-recorder captures, kept under a total size
// and a number of files by deleting the oldest. It is safe for concurrent
// use; pruning assumes no other process writes captures into it.
type Dir struct {
	path     string
	maxBytes int64
	maxFiles int
	mu       sync.Mutex // one save or prune at a time
}

// Entry is one capture in a Dir.
type Entry struct {
	Name string    `json:"name"` // file name, as Open takes it
	Size int64     `json:"size"` // bytes
	Time time.Time `json:"time"` // when it was taken, from its name (UTC, to the second)
}

// OpenDir creates path (0700) if needed and returns it as a capture
// directory holding at most maxBytes in at most maxFiles captures; zero
// means the default. It does not prune until the next Save or Prune.
func OpenDir(path string, maxBytes int64, maxFiles int) (*Dir, error) {
	if maxBytes < 0 || maxFiles < 0 {
		return nil, fmt.Errorf("flight: negative directory cap (%d bytes, %d files)", maxBytes, maxFiles)
	}
	if maxBytes == 0 {
		maxBytes = DefaultDirBytes
	}
	if maxFiles == 0 {
		maxFiles = DefaultDirFiles
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("flight: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("flight: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("flight: %s is not a directory", path)
	}
	return &Dir{path: path, maxBytes: maxBytes, maxFiles: maxFiles}, nil
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// FileName is the name of a capture taken at t for a finding in a
// container, e.g. 20261123T031500Z-oom-kill-web.sysray. Both parts are
// optional and reduced to [A-Za-z0-9._-], so that no name from a container
// runtime can leave the directory or hide the file.
func FileName(t time.Time, finding, container string) string {
	var b strings.Builder
	b.WriteString(t.UTC().Format(timeLayout))
	for _, p := range []string{finding, container} {
		if p = sanitize(p); p != "" {
			b.WriteByte('-')
			b.WriteString(p)
		}
	}
	b.WriteString(ext)
	return b.String()
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !nameChar(c) {
			b[i] = '_'
		}
	}
	if len(b) > maxPart {
		b = b[:maxPart]
	}
	return strings.Trim(string(b), "._-")
}

func nameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// parseName returns the time in a name FileName could have produced, and
// false for anything else: temporary files, other files, and any name that
// could reach outside the directory.
func parseName(name string) (time.Time, bool) {
	if len(name) < len(timeLayout)+len(ext) || !strings.HasSuffix(name, ext) {
		return time.Time{}, false
	}
	for i := 0; i < len(name); i++ {
		if !nameChar(name[i]) {
			return time.Time{}, false
		}
	}
	rest := name[len(timeLayout) : len(name)-len(ext)]
	if rest != "" && rest[0] != '-' {
		return time.Time{}, false
	}
	t, err := time.Parse(timeLayout, name[:len(timeLayout)])
	return t, err == nil
}

// Save writes r's events to a new capture named by FileName(at, finding,
// container) (with -2, -3, ... before the extension if that name is
// taken), then prunes the directory, never deleting the new capture.
func (d *Dir) Save(r *Recorder, hdr *capture.Header, at time.Time, finding, container, reason string) (Entry, Summary, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	base := strings.TrimSuffix(FileName(at, finding, container), ext)
	for i := 1; i <= 100; i++ {
		name := base + ext
		if i > 1 {
			name = base + "-" + strconv.Itoa(i) + ext
		}
		s, err := r.Snapshot(filepath.Join(d.path, name), hdr, reason)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return Entry{}, s, err
		}
		e := Entry{Name: name, Size: s.Bytes, Time: at.UTC().Truncate(time.Second)}
		return e, s, d.prune(name)
	}
	return Entry{}, Summary{}, fmt.Errorf("flight: %s: 100 captures of that name already exist", base+ext)
}

// Prune deletes the oldest captures until the directory is within its
// caps, and temporary files left by writers that died.
func (d *Dir) Prune() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.prune("")
}

func (d *Dir) prune(keep string) error {
	des, err := os.ReadDir(d.path)
	if err != nil {
		return fmt.Errorf("flight: %w", err)
	}
	var errs []error
	now := time.Now()
	for _, de := range des {
		if n := de.Name(); strings.HasPrefix(n, ".") && strings.HasSuffix(n, tmpSuffix) && de.Type().IsRegular() {
			if info, err := de.Info(); err == nil && now.Sub(info.ModTime()) > staleTmp {
				errs = append(errs, os.Remove(filepath.Join(d.path, n)))
			}
		}
	}
	es := d.entries(des)
	var total int64
	for _, e := range es {
		total += e.Size
	}
	// Oldest first, as entries returns them.
	n := len(es)
	for _, e := range es {
		if total <= d.maxBytes && n <= d.maxFiles {
			break
		}
		if e.Name == keep {
			continue
		}
		if err := os.Remove(filepath.Join(d.path, e.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		total -= e.Size
		n--
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("flight: pruning %s: %w", d.path, err)
	}
	return nil
}

type entry struct {
	Entry
	mtime time.Time
}

// entries returns the captures among des, oldest first: by the time in
// their names, then, within a second, by modification time.
func (d *Dir) entries(des []os.DirEntry) []Entry {
	var es []entry
	for _, de := range des {
		t, ok := parseName(de.Name())
		if !ok || !de.Type().IsRegular() {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		es = append(es, entry{Entry{Name: de.Name(), Size: info.Size(), Time: t}, info.ModTime()})
	}
	slices.SortFunc(es, func(a, b entry) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		if c := a.mtime.Compare(b.mtime); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	out := make([]Entry, len(es))
	for i := range es {
		out[i] = es[i].Entry
	}
	return out
}

// List returns the directory's captures, newest first.
func (d *Dir) List() ([]Entry, error) {
	des, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("flight: %w", err)
	}
	es := d.entries(des)
	slices.Reverse(es)
	return es, nil
}

// Open opens one of the captures List returns, for reading. Any other
// name, including one with a path in it, fails with ErrNotFound; a capture
// replaced by a symbolic link is not followed, and one replaced by a FIFO
// does not block.
func (d *Dir) Open(name string) (*os.File, error) {
	if _, ok := parseName(name); !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	f, err := os.OpenFile(filepath.Join(d.path, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("flight: %w", err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return f, nil
}
