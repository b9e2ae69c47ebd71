package output

import (
	"encoding/json"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// Each kind of reclaim event says which it is, in text and JSON.
func TestReclaimWhat(t *testing.T) {
	for _, c := range []struct {
		r    event.Reclaim
		text string
		json string
	}{
		{event.Reclaim{Duration: 512_000, Pages: 32, Nr: 1},
			"memcg_reclaim pages=32 in write <0.000512>",
			`{"duration_ns":512000,"pages":32,"syscall":"write","what":"memcg reclaim"}`},
		{event.Reclaim{Duration: 3_000_000, Pages: 700, Nr: -1, What: event.ReclaimCompact, Order: 9, Status: 8, FaultAddr: 0x7f0000200000},
			"direct_compaction order=9 scanned=700 status=8 in a fault at 0x7f0000200000 <0.003000>",
			`{"duration_ns":3000000,"pages":700,"what":"direct compaction","order":9,"status":8,"fault_addr":139637978824704}`},
		{event.Reclaim{Duration: 1000, Pages: 3, Nr: 0, What: event.ReclaimDirect},
			"direct_reclaim order=0 pages=3 in read <0.000001>",
			`{"duration_ns":1000,"pages":3,"syscall":"read","what":"direct reclaim"}`},
	} {
		e := &event.Event{Kind: event.KindReclaim, PID: 1, TID: 1, Comm: "x", Reclaim: c.r}
		if got := Body(e, event.ArchAMD64); got != c.text {
			t.Errorf("text %q, want %q", got, c.text)
		}
		b, _ := json.Marshal(JSON(e, event.ArchAMD64, 0).Reclaim)
		if string(b) != c.json {
			t.Errorf("JSON %s, want %s", b, c.json)
		}
	}
}
