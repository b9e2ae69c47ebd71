package audit

// Fact is what one NETLINK_AUDIT message a traced process sent says about the
// kernel's audit settings: a status set (AUDIT_SET) or read back
// (AUDIT_GET's reply), or a rule added (AUDIT_ADD_RULE). A live capture
// reads these from the kernel; an imported one (strace) has only what the
// traced processes said to it, as far as the log printed the bytes.
type Fact struct {
	Time    uint64            `json:"time"`
	TID     uint32            `json:"tid"`
	Message string            `json:"message"`
	Fields  map[string]uint32 `json:"fields,omitempty"`
	// Rules: the syscalls the rule audits, as far as the printed bytes go
	// (Partial when strace cut them before the end of the bitmap).
	Syscalls []string `json:"syscalls,omitempty"`
	Partial  bool     `json:"partial,omitempty"`
}
