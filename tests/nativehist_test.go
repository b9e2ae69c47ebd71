package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nativeBucket is one bucket of a native histogram as Prometheus's HTTP
// API returns it.
type nativeBucket struct {
	rule         int // 0: (lo, hi]
	lo, hi       float64
	count        float64
	lower, upper string
}

// promHistogram asks Prometheus for one native histogram sample: its
// count and buckets (ok false when the query has no histogram yet).
func promHistogram(t *testing.T, addr, q string) (count float64, buckets []nativeBucket, raw string, ok bool) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, nil, err.Error(), false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string
		Data   struct {
			Result []struct {
				Histogram [2]json.RawMessage
			}
		}
	}
	if json.Unmarshal(b, &r) != nil || r.Status != "success" || len(r.Data.Result) != 1 || r.Data.Result[0].Histogram[1] == nil {
		return 0, nil, string(b), false
	}
	var h struct {
		Count   string
		Buckets [][4]json.RawMessage
	}
	if err := json.Unmarshal(r.Data.Result[0].Histogram[1], &h); err != nil {
		t.Fatalf("histogram in %s: %v", b, err)
	}
	count, _ = strconv.ParseFloat(h.Count, 64)
	for _, x := range h.Buckets {
		var nb nativeBucket
		var c string
		json.Unmarshal(x[0], &nb.rule)
		json.Unmarshal(x[1], &nb.lower)
		json.Unmarshal(x[2], &nb.upper)
		json.Unmarshal(x[3], &c)
		nb.lo, _ = strconv.ParseFloat(nb.lower, 64)
		nb.hi, _ = strconv.ParseFloat(nb.upper, 64)
		nb.count, _ = strconv.ParseFloat(c, 64)
		buckets = append(buckets, nb)
	}
	return count, buckets, string(b), true
}

// Debian's Prometheus, with native histograms on, scrapes the agent over
// protobuf and stores the syscall latency as a native histogram of schema
// 0 in nanoseconds: 200 sleeps of 5 ms in a container are counted exactly,
// none lands below the bucket of 5 ms ((2^22, 2^23] ns: a sleep never
// ends early, so a bucket shifted down by one would be caught), and the
// median lies in it. The classic series the dashboard reads are stored
// next to it from the same scrape.
func TestAgentNativeHistogram(t *testing.T) {
	alongside(t)
	requireBPF(t)
	requirePrometheus(t)
	ids, dirs := fakeContainers(t, 0xe7, 1)
	a := startAgent(t, "--grace", "1h", "--max-syscalls", "60")
	target := strings.TrimPrefix(a.base, "http://")
	promAddr, dir := startPrometheus(t, fmt.Sprintf(`
  - job_name: sysray
    static_configs:
      - targets: [%q]
`, target), "--enable-feature=native-histograms")
	promLog := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
		return string(b)
	}

	const calls = 200
	inCgroup(t, dirs[0], prog("sleeper"), "5", strconv.Itoa(calls))
	c := ids[0][:12]
	sel := fmt.Sprintf(`sysray_syscall_duration_nanoseconds{container=%q,syscall="clock_nanosleep"}`, c)

	wait := func(want float64) (float64, []nativeBucket, string) {
		t.Helper()
		var count float64
		var buckets []nativeBucket
		var raw string
		for deadline := time.Now().Add(40 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
			var ok bool
			if count, buckets, raw, ok = promHistogram(t, promAddr, sel); ok && count == want {
				break
			}
		}
		if count != want {
			t.Fatalf("Prometheus's native histogram %s counts %v, want %v\n%s\nprometheus log:\n%s", sel, count, want, raw, promLog())
		}
		return count, buckets, raw
	}
	_, buckets, raw := wait(calls)
	// Schema 0: every bucket (2^(k-1), 2^k] ns.
	var inBucket, total float64
	for _, b := range buckets {
		k := math.Log2(b.hi)
		if b.rule != 0 || k != math.Trunc(k) || b.lo != b.hi/2 {
			t.Errorf("bucket %v: not a schema-0 bucket (2^(k-1), 2^k]", b)
		}
		total += b.count
		switch {
		case b.hi <= 1<<22:
			t.Errorf("%v sleeps of 5 ms in (%s, %s] ns: below 5 ms", b.count, b.lower, b.upper)
		case b.hi == 1<<23:
			inBucket = b.count
		}
	}
	t.Logf("native buckets of %d sleeps of 5 ms: %+v", calls, buckets)
	if total != calls || inBucket <= calls/2 {
		t.Errorf("buckets hold %v calls, %v of them in (2^22, 2^23] ns; want %d, most there: %s", total, inBucket, calls, raw)
	}

	// The functions on native histograms: the count and the median.
	n, raw := promQuery(t, promAddr, "histogram_count("+sel+")")
	if n != calls {
		t.Errorf("histogram_count = %v (%s), want %d", n, raw, calls)
	}
	p50, raw := promQuery(t, promAddr, "histogram_quantile(0.5, "+sel+")")
	if !(p50 > 1<<22 && p50 <= 1<<23) {
		t.Errorf("histogram_quantile(0.5) = %v ns (%s), want it in (2^22, 2^23] ns = (4.19, 8.39] ms", p50, raw)
	}
	// A rate over the stored samples is a native histogram too: a second
	// batch makes the series grow between samples.
	inCgroup(t, dirs[0], prog("sleeper"), "5", strconv.Itoa(calls))
	_, buckets, _ = wait(2 * calls)
	r, raw := promQuery(t, promAddr, "histogram_count(rate("+sel+"[1m]))")
	if !(r > 0) {
		t.Errorf("histogram_count(rate(...[1m])) = %v (%s), want a positive rate", r, raw)
	}
	rq, raw := promQuery(t, promAddr, "histogram_quantile(0.5, rate("+sel+"[1m]))")
	if !(rq > 1<<22 && rq <= 1<<23) {
		t.Errorf("histogram_quantile(0.5, rate(...[1m])) = %v ns (%s), want it in (2^22, 2^23] ns", rq, raw)
	}

	// The classic histogram came in the same protobuf scrapes, whole, and
	// its buckets are the native ones summed: le=2^k ns holds the native
	// buckets up to (2^(k-1), 2^k].
	native := map[float64]float64{}
	for _, b := range buckets {
		native[b.hi] = b.count
	}
	var cum float64
	for k := 22; k <= 35; k++ {
		cum += native[float64(uint64(1)<<k)]
		le := strconv.FormatFloat(float64(uint64(1)<<k)/1e9, 'g', -1, 64)
		q := fmt.Sprintf(`sysray_syscall_duration_seconds_bucket{container=%q,syscall="clock_nanosleep",le=%q}`, c, le)
		if got, raw := promQuery(t, promAddr, q); got != cum {
			t.Errorf("%s = %v (%s), want %v from the native buckets", q, got, raw, cum)
		}
	}
	classic := fmt.Sprintf(`sysray_syscall_duration_seconds_bucket{container=%q,syscall="clock_nanosleep",le="+Inf"}`, c)
	if got, raw := promQuery(t, promAddr, classic); got != 2*calls {
		t.Errorf("%s = %v (%s), want %d: the classic buckets must survive native scraping", classic, got, raw, 2*calls)
	}
	t.Logf("Prometheus: histogram_count %v, median %v ns, rate count %v/s, median of the rate %v ns", n, p50, r, rq)
}
