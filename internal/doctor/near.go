package doctor

import (
	"fmt"
	"math"
	"sort"
)

// Near is the candidate a detector came closest to reporting, and the part
// of its rule the candidate did not meet. When the doctor is silent on a
// case its user knows is there, the first question is whether it looked:
// Near says what it saw, and by how much it fell short, so that a user can
// tell a case the rules leave out on purpose from one they missed (and
// report the second with the numbers that show it).
type Near struct {
	ID      ID     `json:"id"`      // the finding it would have been
	Subject string `json:"subject"` // what was looked at
	Short   string `json:"short"`   // the rule, and the candidate's measure against it
	// Closeness is the candidate's measure over the rule's bound, under 1
	// for a candidate that fell short: how near the finding it came.
	Closeness float64 `json:"closeness"`
}

// A nearer is a detector that can say which of its candidates came closest
// to a finding it did not make.
type nearer interface {
	near(env *Env) *Near
}

// nears asks the detectors that reported nothing for their nearest miss,
// nearest first.
func nears(env *Env, silent []Detector) []Near {
	var out []Near
	for _, det := range silent {
		n, ok := det.(nearer)
		if !ok {
			continue
		}
		if m := n.near(env); m != nil {
			m.Closeness = math.Round(m.Closeness*1000) / 1000
			out = append(out, *m)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Closeness > out[j].Closeness })
	return out
}

// minR2 is the R² a line through bins points needs to pass significant.
func minR2(bins int) float64 {
	df := bins - 2
	if df < 4 {
		return 1
	}
	t := tCrit[min(df, len(tCrit)-1)]
	return max(0.7, t*t/(t*t+float64(df)))
}

// pct writes a share as a percentage, to a tenth under 10%: a near miss
// at 0.4% is not one at 0%.
func pct(f float64) string {
	if f < 0.1 {
		return fmt.Sprintf("%.1f%%", 100*f)
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}
