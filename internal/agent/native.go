package agent

import (
	"math/bits"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sysray/sysray/internal/stat"
)

// The kernel's latency histogram (stat.Hist, bpf/stat.h hist_bucket) is
// log-linear: values 0 to 7 ns exactly, then four linear buckets per power
// of two, [2^m, 2^(m+1)) split at 1.25, 1.5 and 1.75 times 2^m. The finest
// native-histogram schema whose boundaries are all kernel boundaries is
// schema 0 (boundaries 2^k; the negative schemas are coarser), and only in
// a unit that is a power of two of the nanosecond: in seconds the
// boundaries 2^k s fall inside kernel buckets (log2(1e-9) is not an
// integer), and no finer schema's 2^(j/2^n) lands on 1.25, 1.5 or 1.75
// (between powers of two it is irrational). So the native series counts
// nanoseconds, schema 0, and has a name of its own.
//
// Native bucket k of schema 0 is (2^(k-1), 2^k]; the kernel's octave
// [2^(k-1), 2^k) of integer nanoseconds goes to it whole. A reading of v ns
// from a 1 ns clock stands for [v, v+1), so the octave's readings cover
// [2^(k-1), 2^k), which is bucket k but for its two end points: every
// count is exact up to the boundary value, the same convention the classic
// buckets keep (a latency of exactly 2^k ns is counted above le=2^k).
// Zero-latency calls are the zero bucket (threshold 0).
const (
	// nativeBuckets holds the zero bucket (index 0) and schema-0 buckets 1
	// to 41: the kernel's last bucket starts at 7*2^38 ns, in bucket 41.
	// That bucket also takes whatever the kernel clamped into its last
	// bucket (2^41 ns, 36 minutes, and more): a native histogram has no
	// +Inf bucket.
	nativeBuckets = 42
	nativeSchema  = 0
)

// natHist is a kernel histogram folded onto the native buckets, modulo 2^32
// like promHist.
type natHist [nativeBuckets]uint32

// nativeOf maps each kernel bucket to its native bucket: the bit length of
// its smallest value is k for the octave [2^(k-1), 2^k), and 0 for 0 ns.
var nativeOf = func() (m [stat.Buckets]uint8) {
	for i := range m {
		m[i] = uint8(bits.Len64(kernelLow(i)))
	}
	return m
}()

func foldNative(h *stat.Hist) (p natHist) {
	for i, n := range h {
		p[nativeOf[i]] += uint32(n)
	}
	return p
}

var descNative = prometheus.NewDesc("sysray_syscall_duration_nanoseconds",
	"Time from entry to exit of syscalls, by syscall and container, as a native histogram (schema 0, in nanoseconds: exactly the kernel's power-of-two buckets). Served to protobuf scrapes only.",
	append([]string{"syscall"}, ctrLabels...), nil)

// nativeCollector serves the syscall latency histograms as native
// histograms. It is registered only for scrapes that negotiate protobuf,
// the one exposition format that carries native buckets: a text scrape
// would see nothing of it but a count, a sum and a +Inf bucket.
type nativeCollector struct{ a *Aggregator }

func (n nativeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descNative }

func (n nativeCollector) Collect(ch chan<- prometheus.Metric) {
	v := n.a.View()
	if v.At.IsZero() {
		return
	}
	for i := range v.Syscalls {
		s := &v.Syscalls[i]
		pos := map[int]int64{}
		for k := 1; k < nativeBuckets; k++ {
			if s.Native[k] > 0 {
				pos[k] = int64(s.Native[k])
			}
		}
		m, err := prometheus.NewConstNativeHistogram(descNative, s.Count, float64(s.SumNS), pos, nil,
			s.Native[0], nativeSchema, 0, time.Time{}, s.Syscall, s.Container, s.Pod, s.Namespace)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descNative, err)
			continue
		}
		ch <- noCreated{m}
	}
}

// noCreated drops the created timestamp NewConstNativeHistogram insists
// on: the series do not keep when they began, and year 1 would be a lie.
type noCreated struct{ prometheus.Metric }

func (m noCreated) Write(out *dto.Metric) error {
	if err := m.Metric.Write(out); err != nil {
		return err
	}
	if out.Histogram != nil {
		out.Histogram.CreatedTimestamp = nil
	}
	return nil
}
