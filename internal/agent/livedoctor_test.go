package agent

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/audit"
	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/session"
)

// Each window's doctor is handed the audit counters' growth over that
// window: seconds of waiting make a critical audit-backlog-stall with no
// traced call at all, and a window without growth does not find it again.
// While the backlog is full the doctor does not read files (the OOM count
// is the last one read).
func TestWindowAuditStall(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	lc := session.NewLive()
	defer lc.Close()
	full := &audit.Status{Enabled: 1, BacklogLimit: 16, Backlog: 16, BacklogWaitTime: 250, BacklogWaitTimeActual: 100}
	aw := &auditWatch{Watcher: audit.NewWatcher(full, host.Mono, nil)}
	cfg := Defaults
	cfg.CaptureDir = ""
	a, err := newLiveDoctor(log, lc, aw, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !aw.Stalling() {
		t.Fatal("a full backlog at the first read: stalling")
	}
	a.oom.Store(42)
	if n := a.oomKills(); n != 42 {
		t.Errorf("OOM kills read while stalling: %d, want the last read, 42", n)
	}

	st := *full
	st.BacklogWaitTimeActual += uint32(3 * a.hz) // 3 s of waiting
	st.Lost = 5
	aw.Record(&st)
	a.closeWindow(nil, [2]uint64{})
	var got *Finding
	for _, f := range a.store.List(time.Now()) {
		if f.ID == "audit-backlog-stall" {
			got = &f
		}
	}
	if got == nil {
		t.Fatalf("no audit-backlog-stall: %+v", a.store.List(time.Now()))
	}
	if got.Severity.String() != "critical" || got.Evidence["waited_ns"] != uint64(3e9) || got.Evidence["lost_records"] != uint32(5) {
		t.Errorf("finding %s %q, evidence %v", got.Severity, got.Title, got.Evidence)
	}
	// The next window: no read, no growth.
	a.closeWindow(nil, [2]uint64{})
	for _, f := range a.store.List(time.Now()) {
		if f.ID == "audit-backlog-stall" && f.Occurrences != 1 {
			t.Errorf("found again in a window without waiting: %d occurrences", f.Occurrences)
		}
	}
}
