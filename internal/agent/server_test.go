package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/stat"
)

// fakeSource hands out a getppid cell that grows by 7 a read, or an error.
type fakeSource struct {
	mu    sync.Mutex
	n     uint64
	fail  bool
	reads int
}

func (f *fakeSource) Read() (Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.fail {
		return Snapshot{}, errors.New("the probe is gone")
	}
	f.n += 7
	return Snapshot{Cells: []stat.Cell{cell(3, nrGetppid, 1, f.n, 400, 0)}}, nil
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHealthAndMetrics(t *testing.T) {
	src := &fakeSource{}
	agg := New(Options{Arch: event.ArchAMD64, Name: names(nil), MaxContainers: 5, MaxSyscalls: 5, Grace: time.Hour})
	ag := NewAgent(agg, src, 50*time.Millisecond, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	srv := httptest.NewServer(ag.Handler())
	defer srv.Close()

	code, body := get(t, srv.URL+"/api/health")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"status":"starting"`) {
		t.Errorf("before the first read: %d %s", code, body)
	}
	if code, body := get(t, srv.URL+"/healthz"); code != http.StatusServiceUnavailable || body != "starting\n" {
		t.Errorf("/healthz before the first read: %d %q", code, body)
	}
	ag.ReadOnce()
	ag.ReadOnce()
	if code, body := get(t, srv.URL+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz after two reads: %d %q", code, body)
	}
	code, body = get(t, srv.URL+"/api/health")
	var h Health
	if err := json.Unmarshal([]byte(body), &h); err != nil || code != 200 || h.Status != "ok" || h.Reads != 2 || h.SyscallSeries != 1 {
		t.Errorf("after two reads: %d %s", code, body)
	}
	_, metrics := get(t, srv.URL+"/metrics")
	for _, want := range []string{
		`sysray_syscall_duration_seconds_count{container="host",namespace="",pod="",syscall="getppid"} 14`,
		`sysray_syscall_duration_seconds_bucket{container="host",namespace="",pod="",syscall="getppid",le="1.024e-06"} 14`,
		"go_goroutines ", "process_resident_memory_bytes ",
		`sysray_build_info{goversion="` + runtime.Version() + `",revision="",version="devel"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// A scrape does not read the source.
	before := src.reads
	get(t, srv.URL+"/metrics")
	if src.reads != before {
		t.Errorf("a scrape read the source")
	}

	src.mu.Lock()
	src.fail = true
	src.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	ag.Run(ctx)
	cancel()
	code, body = get(t, srv.URL+"/api/health")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"status":"stale"`) || !strings.Contains(body, "the probe is gone") {
		t.Errorf("after failing reads: %d %s", code, body)
	}
	// The series keep their last values while reads fail.
	_, metrics = get(t, srv.URL+"/metrics")
	if !strings.Contains(metrics, `syscall="getppid"} 14`) {
		t.Errorf("series lost while reads fail")
	}
}
