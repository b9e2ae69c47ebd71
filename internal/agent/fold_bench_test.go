package agent

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/stat"
)

// foldCells is a read of 2000 cells (100 processes, 20 syscalls each) whose
// weighted buckets do not sum to their counts, as under budgeted timing:
// every cell is spread.
func foldCells(round uint64) []stat.Cell {
	cells := make([]stat.Cell, 0, 2000)
	for p := range uint32(100) {
		for nr := range uint32(20) {
			c := stat.Cell{Key: stat.Key{PID: 1000 + p, Nr: nr, Cgroup: uint64(p % 10)}, Count: 50 * round, Total: 50 * round * 3000}
			c.Hist[stat.Bucket(900)] = 20 * round
			c.Hist[stat.Bucket(3000)] = 25 * round
			c.Hist[stat.Bucket(1<<20)] = round
			cells = append(cells, c)
		}
	}
	return cells
}

func BenchmarkFold(b *testing.B) {
	agg := newAgg(nil, 10, 60)
	now := time.Unix(100, 0)
	for i := range b.N {
		now = now.Add(time.Second)
		agg.Fold(now, Snapshot{Cells: foldCells(uint64(i + 1))})
	}
}

func BenchmarkScrape(b *testing.B) {
	for _, accept := range []string{"text/plain;version=0.0.4", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"} {
		b.Run(accept[:10], func(b *testing.B) {
			agg := newAgg(map[uint64]string{1: "a", 2: "b", 3: "c", 4: "d", 5: "e", 6: "f", 7: "g", 8: "h", 9: "i"}, 10, 60)
			agg.Fold(time.Unix(100, 0), Snapshot{Cells: foldCells(1)})
			ag := NewAgent(agg, nil, time.Hour, slog.New(slog.NewJSONHandler(io.Discard, nil)))
			h := ag.Handler()
			req := httptest.NewRequest("GET", "/metrics", nil)
			req.Header.Set("Accept", accept)
			b.ResetTimer()
			var n int
			for range b.N {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				n = w.Body.Len()
			}
			b.ReportMetric(float64(n), "bytes/scrape")
		})
	}
}
