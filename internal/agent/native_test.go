package agent

import (
	"io"
	"log/slog"
	"math/bits"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/sysray/sysray/internal/stat"
)

// wantNative is where a native histogram of schema 0 puts a reading of v
// ns from a 1 ns clock, computed from the definition and not from the
// kernel's buckets: the reading stands for [v, v+1), whose midpoint v+0.5
// lies in exactly one bucket (2^(k-1), 2^k]; 0 ns is the zero bucket.
func wantNative(v uint64) int {
	if v == 0 {
		return 0
	}
	k := -1
	for k2 := 0; k2 < 64; k2++ {
		if float64(v)+0.5 <= float64(uint64(1)<<k2) {
			k = k2
			break
		}
	}
	// k2 = 0 would be (0.5, 1], below any reading but 0.
	return k
}

// Every kernel bucket lies inside one native bucket, so folding loses
// nothing: each reading's native bucket is its kernel bucket's.
func TestNativeBucketsAreKernelOctaves(t *testing.T) {
	for i := 0; i < stat.Buckets-1; i++ {
		lo, hi := kernelLow(i), kernelLow(i+1)-1 // the bucket's integer readings
		if k := int(nativeOf[i]); wantNative(lo) != k || wantNative(hi) != k {
			t.Fatalf("kernel bucket %d [%d, %d] ns: native %d, but its ends belong to %d and %d",
				i, lo, hi, k, wantNative(lo), wantNative(hi))
		}
	}
	vals := []uint64{0, 1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 1023, 1024, 1025, 1<<40 - 1, 1<<41 - 1, 1 << 41, 1 << 50}
	for range 100000 {
		vals = append(vals, uint64(rand.ExpFloat64()*float64(rand.Uint64N(1<<38)+1)))
	}
	for _, v := range vals {
		if v >= 1<<41 {
			// The kernel's last bucket holds 7*2^38 ns and everything
			// above: its native bucket is 41 whatever the reading.
			if got := nativeOf[stat.Bucket(v)]; got != nativeBuckets-1 {
				t.Fatalf("%d ns: native bucket %d, want the last, %d", v, got, nativeBuckets-1)
			}
			continue
		}
		if got, want := int(nativeOf[stat.Bucket(v)]), wantNative(v); got != want {
			t.Fatalf("%d ns: native bucket %d, want %d", v, got, want)
		}
		// As a bound, only a reading of exactly 2^(k-1) sits outside
		// (2^(k-1), 2^k]: on the boundary, one bucket higher than an
		// upper-inclusive bucket would put it.
		if k := wantNative(v); k > 0 && (v > 1<<k || (v <= 1<<(k-1) && v != 1<<(k-1))) {
			t.Fatalf("%d ns is not in bucket %d = (%d, %d]", v, k, 1<<(k-1), 1<<k)
		}
		if k := wantNative(v); v > 0 && bits.Len64(v) != k {
			t.Fatalf("%d ns: bucket %d is not its bit length %d", v, k, bits.Len64(v))
		}
	}
}

// expand turns spans and deltas into bucket counts by index.
func expand(spans []*dto.BucketSpan, deltas []int64) map[int]uint64 {
	m := map[int]uint64{}
	idx, d, c := 0, 0, int64(0)
	for _, s := range spans {
		idx += int(s.GetOffset())
		for range s.GetLength() {
			c += deltas[d]
			d++
			if c != 0 {
				m[idx] = uint64(c)
			}
			idx++
		}
	}
	return m
}

func scrape(t *testing.T, url, accept string) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	fams := map[string]*dto.MetricFamily{}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding %s: %v", ct, err)
		}
		fams[mf.GetName()] = &mf
	}
	return fams, ct
}

const acceptProto = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3"

// A protobuf scrape gets the kernel's buckets as a native histogram whose
// buckets are the kernel's octaves exactly, next to the classic histogram;
// a text scrape gets the classic histogram alone.
func TestNativeHistogramScrape(t *testing.T) {
	readings := map[uint64]uint64{0: 3, 5: 2, 1000: 7, 1500: 4, 1 << 20: 1, 3_000_000: 6}
	c := stat.Cell{Key: stat.Key{PID: 9, Nr: nrRead, Cgroup: 1}}
	want := map[int]uint64{}
	var zero uint64
	for v, n := range readings {
		c.Hist[stat.Bucket(v)] += n
		c.Count += n
		c.Total += v * n
		if k := wantNative(v); k == 0 {
			zero += n
		} else {
			want[k] += n
		}
	}
	agg := newAgg(nil, 5, 5)
	agg.Fold(time.Unix(100, 0), Snapshot{Cells: []stat.Cell{c}})
	ag := NewAgent(agg, nil, time.Hour, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	srv := httptest.NewServer(ag.Handler())
	defer srv.Close()

	fams, ct := scrape(t, srv.URL+"/metrics", acceptProto)
	if !strings.Contains(ct, "application/vnd.google.protobuf") {
		t.Fatalf("content type %q, want protobuf", ct)
	}
	nf := fams["sysray_syscall_duration_nanoseconds"]
	if nf == nil || nf.GetType() != dto.MetricType_HISTOGRAM || len(nf.Metric) != 1 {
		t.Fatalf("native family: %v", nf)
	}
	h := nf.Metric[0].GetHistogram()
	if h.Schema == nil || h.GetSchema() != 0 || h.ZeroThreshold == nil || h.GetZeroThreshold() != 0 {
		t.Fatalf("schema %v, zero threshold %v: want 0 and 0", h.Schema, h.ZeroThreshold)
	}
	if h.GetZeroCount() != zero || zero != 3 {
		t.Errorf("zero bucket %d, want %d", h.GetZeroCount(), zero)
	}
	if h.GetSampleCount() != c.Count || h.GetSampleSum() != float64(c.Total) {
		t.Errorf("count %d sum %g, want %d and %d", h.GetSampleCount(), h.GetSampleSum(), c.Count, c.Total)
	}
	if h.CreatedTimestamp != nil {
		t.Errorf("created timestamp %v: the series do not know theirs", h.CreatedTimestamp)
	}
	got := expand(h.GetPositiveSpan(), h.GetPositiveDelta())
	// 5 ns in (4, 8], 1000 in (512, 1024], 1500 in (1024, 2048], 2^20 on
	// the boundary, in (2^20, 2^21], 3 ms in (2^21, 2^22].
	fixed := map[int]uint64{3: 2, 10: 7, 11: 4, 21: 1, 22: 6}
	if len(got) != len(want) || len(want) != len(fixed) {
		t.Errorf("buckets %v, want %v (%v)", got, want, fixed)
	}
	for k, n := range want {
		if got[k] != n || fixed[k] != n {
			t.Errorf("bucket %d: %d, want %d (%d)", k, got[k], n, fixed[k])
		}
	}
	if len(h.GetNegativeSpan()) != 0 || len(h.GetBucket()) != 0 {
		t.Errorf("negative spans %v, classic buckets %v on the native series", h.GetNegativeSpan(), h.GetBucket())
	}

	// The classic histogram is there too, as a text scrape sees it.
	cf := fams["sysray_syscall_duration_seconds"]
	if cf == nil || len(cf.Metric) != 1 {
		t.Fatalf("classic family missing from the protobuf scrape: %v", cf)
	}
	ch := cf.Metric[0].GetHistogram()
	if len(ch.GetBucket()) != promBuckets-1 || ch.Schema != nil || len(ch.GetPositiveSpan()) != 0 {
		t.Fatalf("classic histogram: %d buckets, schema %v, spans %v", len(ch.GetBucket()), ch.Schema, ch.GetPositiveSpan())
	}
	cum := map[float64]uint64{}
	for _, b := range ch.GetBucket() {
		cum[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	// le=1.024µs holds 0, 5 and 1000 ns; le=2.048µs adds 1500; 2^20 ns
	// (le=2^21 ns) and 3 ms (le=2^22 ns) complete it.
	for le, n := range map[float64]uint64{1024e-9: 12, 2048e-9: 16, 1048576e-9: 16, 2097152e-9: 17, 4194304e-9: 23} {
		if cum[le] != n {
			t.Errorf("classic le=%g: %d, want %d", le, cum[le], n)
		}
	}

	tf, ct := scrape(t, srv.URL+"/metrics", "text/plain;version=0.0.4")
	if !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("content type %q, want text", ct)
	}
	if tf["sysray_syscall_duration_nanoseconds"] != nil {
		t.Errorf("a text scrape got the native family, which text cannot carry")
	}
	if th := tf["sysray_syscall_duration_seconds"]; th == nil || len(th.Metric[0].GetHistogram().GetBucket()) != promBuckets { // text spells +Inf out
		t.Errorf("a text scrape lost the classic histogram: %v", th)
	}
}

// Duty-cycled and budget-weighted counts stay a valid native histogram:
// the buckets are scaled and spread to sum to the count, as the classic
// ones are.
func TestNativeHistogramScaled(t *testing.T) {
	c := stat.Cell{Key: stat.Key{PID: 9, Nr: nrRead, Cgroup: 1}, Count: 40, Total: 40 * 3000}
	c.Hist[stat.Bucket(3000)] = 32 // weighted timing: the buckets say 33, the count 40
	c.Hist[stat.Bucket(100)] = 1
	agg := newAgg(nil, 5, 5)
	agg.Fold(time.Unix(100, 0), Snapshot{Cells: []stat.Cell{c}, Scale: 3})
	s := find(agg.View(), "host", "read")
	var sum uint64
	for _, n := range s.Native {
		sum += n
	}
	if s.Count != 120 || sum != s.Count || s.Native[12] < 114 {
		t.Fatalf("count %d, native buckets %v", s.Count, s.Native)
	}
}
