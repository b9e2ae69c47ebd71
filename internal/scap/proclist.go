package scap

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Thread is one entry of a process list block: the threads alive when
// the capture began.
type Thread struct {
	TID, PID, PTID uint64
	Comm           string
	Exe            string // argv[0], or the executable's path where the block has it (v7 on)
	Args           []string
	Cwd            string
	// Cgroups are the thread's cgroups as "subsys=path" (v4 on).
	Cgroups []string
}

// IsProcList says whether a block type is a process list, and its version.
func IsProcList(typ uint32) (int, bool) {
	switch typ &^ blockInternal {
	case blockProcV1:
		return 1, true
	case blockProcV2:
		return 2, true
	case blockProcV3:
		return 3, true
	case blockProcV4:
		return 4, true
	case blockProcV5:
		return 5, true
	case blockProcV6:
		return 6, true
	case blockProcV7:
		return 7, true
	case blockProcV8:
		return 8, true
	case blockProcV9:
		return 9, true
	}
	return 0, false
}

// cursor reads little-endian fields, remembering the first overrun
// instead of panicking on it.
type cursor struct {
	b   []byte
	pos int
	bad bool
}

func (c *cursor) take(n int) []byte {
	if c.bad || n < 0 || n > len(c.b)-c.pos {
		c.bad = true
		return nil
	}
	s := c.b[c.pos : c.pos+n]
	c.pos += n
	return s
}

func (c *cursor) u16() uint16 {
	if s := c.take(2); s != nil {
		return binary.LittleEndian.Uint16(s)
	}
	return 0
}

func (c *cursor) u32() uint32 {
	if s := c.take(4); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (c *cursor) u64() uint64 {
	if s := c.take(8); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

// str reads a u16-length string, without trailing NULs.
func (c *cursor) str() string {
	return string(bytes.TrimRight(c.take(int(c.u16())), "\x00"))
}

// ParseProcList decodes a process list block of the given version. Each
// version adds fields; v9 prefixes each entry with its length, so fields
// newer than this reader are skipped.
func ParseProcList(version int, body []byte) ([]Thread, error) {
	var out []Thread
	c := &cursor{b: body}
	// The body is padded to 4 bytes: fewer than 4 left is the padding.
	for len(body)-c.pos >= 4 {
		start := c.pos
		var sub uint32
		if version >= 9 {
			sub = c.u32()
			if sub < 4 || int(sub) > len(body)-start {
				return out, fmt.Errorf("scap: process list entry at %d: length %d overruns the block", start, sub)
			}
		}
		var t Thread
		t.TID, t.PID, t.PTID = c.u64(), c.u64(), c.u64()
		if version >= 6 {
			c.u64() // session id
		}
		if version >= 8 {
			c.u64() // process group id as the namespace sees it
		}
		t.Comm = c.str()
		t.Exe = c.str()
		if version >= 7 {
			if p := c.str(); p != "" {
				t.Exe = p
			}
		}
		args := bytes.TrimRight(c.take(int(c.u16())), "\x00")
		if len(args) > 0 {
			for _, a := range bytes.Split(args, []byte{0}) {
				t.Args = append(t.Args, string(a))
			}
		}
		t.Cwd = c.str()
		if version >= 9 {
			// The fields up to the cgroups, then the rest (root, login
			// uid, ...) by the entry's length.
			at := c.pos
			c.take(8 + 4 + 4 + 4 + 4 + 4 + 4 + 8 + 8)
			c.take(int(c.u16())) // environment
			c.take(8 + 8)
			cg := c.take(int(c.u16()))
			if c.bad || c.pos > start+int(sub) {
				// An entry too short for them still has what came before.
				c.bad, c.pos, cg = false, at, nil
			}
			t.Cgroups = splitCgroups(cg)
			if c.bad {
				return out, fmt.Errorf("scap: process list entry at %d: fields overrun its length", start)
			}
			if start+int(sub) < c.pos {
				return out, fmt.Errorf("scap: process list entry at %d: fields overrun its length %d", start, sub)
			}
			c.pos = start + int(sub)
			out = append(out, t)
			continue
		}
		c.u64()           // fd limit
		c.take(4 + 4 + 4) // flags, uid, gid
		if version >= 2 {
			c.take(4 + 4 + 4 + 8 + 8) // vm size, rss, swap; major and minor faults
		}
		if version >= 3 {
			c.take(int(c.u16())) // environment
		}
		if version >= 4 {
			c.take(8 + 8) // tid and pid in their namespace
			t.Cgroups = splitCgroups(c.take(int(c.u16())))
		}
		if version >= 5 {
			c.take(int(c.u16())) // root
		}
		if c.bad {
			return out, fmt.Errorf("scap: process list (v%d) entry at %d overruns the block", version, start)
		}
		out = append(out, t)
	}
	return out, nil
}

// splitCgroups splits a cgroups field: NUL-terminated "subsys=path"
// strings.
func splitCgroups(b []byte) []string {
	var out []string
	for _, s := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		if len(s) > 0 {
			out = append(out, string(s))
		}
	}
	return out
}
