package stat

import "math"

// Budget is how live counting times calls (probe.Config's Budget and
// Every). The clock costs as much as all the rest of counting a call, so
// only some calls are timed; counts and failures stay exact.
type Budget struct {
	// PerJiffy calls of a syscall per thread and kernel tick are all
	// timed: 8 is 2,000 calls a second at HZ=250, so a syscall a thread
	// makes less often than that (most of them, in most programs) has
	// every latency measured, and a thread's slow calls are rarely
	// sampled away.
	PerJiffy uint32
	// Every: past that, a random 1 call in Every is timed and stands for
	// Every calls. At 16 the clock's cost falls to about a sixteenth, and
	// a syscall made 100,000 times a second still has 6,000 timed calls a
	// second to read percentiles from.
	Every uint32
}

// DefaultBudget is what stat and top use unless told --exact-timing.
var DefaultBudget = Budget{PerJiffy: 8, Every: 16}

// z99 is the normal quantile for a two-sided 99% confidence interval.
const z99 = 2.576

// RankError bounds, at 99% confidence, how far the rank at which a
// percentile q is read from a weighted histogram may lie from q, as a
// fraction of calls, when timed of calls were timed under budgeted timing
// with 1 in every sampled. The calls within the budget were all timed and
// add no error; the others, about (calls-timed)*every/(every-1) of them,
// were sampled at random, one in every, each standing for every calls. The
// count of sampled calls below the q-quantile then has a variance of at
// most q(1-q)(every-1) per sampled-from call, so the rank's standard error
// is at most sqrt(q(1-q)*every*(calls-timed))/calls.
func RankError(q float64, calls, timed uint64, every uint32) float64 {
	if every < 2 || timed >= calls || calls == 0 {
		return 0
	}
	v := q * (1 - q) * float64(every) * float64(calls-timed)
	return z99 * math.Sqrt(v) / float64(calls)
}
