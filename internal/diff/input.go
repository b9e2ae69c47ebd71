package diff

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// KindFolded is a file of folded stacks ("frame;frame;frame count" lines), as
// `sysray profile -o X.folded` and flamegraph.pl's stackcollapse scripts
// write: stacks for a flame graph, but no syscall counts.
const KindFolded = "folded"

// captureMagic is how a capture file begins (docs/capture-format.md).
const captureMagic = "SYSRAY\x89\n"

// Sniff says what path holds, by its content: KindCapture, KindStat or
// KindFolded; anything else is an error that says what was expected.
func Sniff(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	head = head[:n]
	switch {
	case n == 0:
		return "", fmt.Errorf("%s: empty file; want a sysray capture or `sysray stat --json` output", path)
	case bytes.HasPrefix(head, []byte(captureMagic)) || bytes.HasPrefix([]byte(captureMagic), head):
		return KindCapture, nil
	case bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte("{")):
		return KindStat, nil
	case looksFolded(head):
		return KindFolded, nil
	}
	return "", fmt.Errorf("%s: not a sysray capture (sysray record -w), `sysray stat --json` output or folded stacks", path)
}

var foldedLine = regexp.MustCompile(`^\S.* [0-9]+$`)

// looksFolded: the first line (whole within head) is "stack count".
func looksFolded(head []byte) bool {
	line, _, ok := bytes.Cut(head, []byte("\n"))
	return ok && bytes.IndexByte(head, 0) < 0 && foldedLine.Match(bytes.TrimRight(line, "\r"))
}

// statDoc is what `sysray stat --json` writes (stat.PrintJSON).
type statDoc struct {
	By    *string `json:"by"`
	Drops uint64  `json:"drops"`
	Rows  *[]struct {
		Name    string            `json:"name"`
		Calls   uint64            `json:"calls"`
		Errors  uint64            `json:"errors"`
		TotalNS uint64            `json:"total_ns"`
		P50NS   uint64            `json:"p50_ns"`
		P99NS   uint64            `json:"p99_ns"`
		MaxNS   uint64            `json:"max_ns"`
		Errnos  map[string]uint64 `json:"errnos"`
	} `json:"rows"`
}

// procName splits stat's "comm[pid]" process names.
var procName = regexp.MustCompile(`^(.*)\[([0-9]+)\]$`)

// ReadStat reads a `sysray stat --json` document. Processes are matched by
// name across runs (their pids differ), so its "comm[pid]" rows are merged
// by comm; percentiles of merged rows are the largest of theirs, an upper
// bound, since the document keeps no histogram to merge.
func ReadStat(path string) (*Side, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d statDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%s: not `sysray stat --json` output: %v", path, err)
	}
	if d.By == nil || d.Rows == nil {
		return nil, fmt.Errorf("%s: a JSON document without \"by\" and \"rows\" is not `sysray stat --json` output", path)
	}
	switch *d.By {
	case "syscall", "process", "container":
	default:
		return nil, fmt.Errorf("%s: \"by\": %q; want syscall, process or container", path, *d.By)
	}
	s := NewSide(path, KindStat, *d.By)
	s.Drops = d.Drops
	for _, r := range *d.Rows {
		name := r.Name
		var pid uint32
		if s.By == "process" {
			if m := procName.FindStringSubmatch(name); m != nil && m[1] != "" {
				name = m[1]
				p, _ := strconv.ParseUint(m[2], 10, 32)
				pid = uint32(p)
			}
		}
		if name == "" {
			return nil, fmt.Errorf("%s: a row without a name", path)
		}
		g, merged := s.Groups[name]
		if !merged {
			g = s.Group(name)
		}
		g.Calls += r.Calls
		g.Errors += r.Errors
		g.TotalNS += r.TotalNS
		g.P50NS = max(g.P50NS, r.P50NS)
		g.P99NS = max(g.P99NS, r.P99NS)
		g.MaxNS = max(g.MaxNS, r.MaxNS)
		for e, n := range r.Errnos {
			if g.Errnos == nil {
				g.Errnos = map[string]uint64{}
			}
			g.Errnos[e] += n
		}
		if pid != 0 {
			g.PIDs = append(g.PIDs, pid)
		}
	}
	return s, nil
}

// ReadFolded reads folded stacks: a weight per stack, frames joined by ';'.
// A process root written "comm[pid]" (sysray profile) becomes "comm", so the
// same program matches across runs.
func ReadFolded(path string) (Stacks, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := Stacks{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseUint(line[i+1:], 10, 64)
		if i <= 0 || err != nil {
			return nil, fmt.Errorf("%s:%d: not a folded stack (frames;... count)", path, n)
		}
		frames := strings.Split(line[:i], ";")
		if m := procName.FindStringSubmatch(frames[0]); m != nil && m[1] != "" {
			frames[0] = m[1]
		}
		out[strings.Join(frames, ";")] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}
