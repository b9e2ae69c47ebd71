package strace

import (
	"encoding/binary"
	"regexp"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/event"
)

// maxAuditFacts bounds what a log full of audit traffic puts in a header.
const maxAuditFacts = 64

var auditMsg = regexp.MustCompile(`nlmsg_type=(AUDIT_SET|AUDIT_GET|AUDIT_ADD_RULE)\b[^}]*\}, ("(?:[^"\\]|\\.)*")`)

// struct audit_status, in order: each field's name, and the AUDIT_STATUS_*
// bit that says an AUDIT_SET sets it (0: never set, only read).
var auditStatus = []struct {
	name string
	mask uint32
}{
	{"mask", 0}, {"enabled", 0x1}, {"failure", 0x2}, {"pid", 0x4}, {"rate_limit", 0x8},
	{"backlog_limit", 0x10}, {"lost", 0}, {"backlog", 0}, {"feature_bitmap", 0},
	{"backlog_wait_time", 0x20}, {"backlog_wait_time_actual", 0},
}

// auditFacts reads the audit messages a send or receive call printed.
func (c *Converter) auditFacts(tid uint32, at uint64, name, args string, ret int64) {
	if len(c.Audit) >= maxAuditFacts || ret < 0 {
		return
	}
	recv := name == "recvfrom" || name == "recvmsg"
	send := name == "sendto" || name == "sendmsg"
	if !recv && !send {
		return
	}
	for _, m := range auditMsg.FindAllStringSubmatch(args, -1) {
		b, _, ok := unquote(m[2])
		if !ok {
			continue
		}
		f := audit.Fact{Time: at, TID: tid, Message: m[1]}
		switch {
		case m[1] == "AUDIT_SET" && send:
			f.Fields = statusFields(b, true)
		case m[1] == "AUDIT_GET" && recv:
			f.Fields = statusFields(b, false)
		case m[1] == "AUDIT_ADD_RULE" && send:
			f.Syscalls, f.Partial = ruleSyscalls(c.arch, b)
		default:
			continue
		}
		c.Audit = append(c.Audit, f)
		if len(c.Audit) >= maxAuditFacts {
			return
		}
	}
}

// statusFields decodes the struct audit_status fields present in b; for a
// set, only the fields its mask says it sets.
func statusFields(b []byte, set bool) map[string]uint32 {
	out := map[string]uint32{}
	if len(b) < 4 {
		return out
	}
	mask := binary.LittleEndian.Uint32(b)
	for i, f := range auditStatus[1:] {
		off := 4 * (i + 1)
		if off+4 > len(b) {
			break
		}
		if set && mask&f.mask == 0 {
			continue
		}
		out[f.name] = binary.LittleEndian.Uint32(b[off:])
	}
	return out
}

// ruleSyscalls reads struct audit_rule_data's syscall bitmap (64 words
// from byte 12). A rule on every syscall lists "all".
func ruleSyscalls(a event.Arch, b []byte) ([]string, bool) {
	const start, words = 12, 64
	var names []string
	set := 0
	for w := range words {
		off := start + 4*w
		if off+4 > len(b) {
			return names, true
		}
		v := binary.LittleEndian.Uint32(b[off:])
		for bit := range 32 {
			if v&(1<<bit) != 0 {
				set++
				if len(names) < 16 {
					names = append(names, event.SyscallName(a, uint32(w*32+bit)))
				}
			}
		}
	}
	if set >= 32*words-1 {
		return []string{"all"}, false
	}
	return names, false
}
