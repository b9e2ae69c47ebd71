package doctor

import (
	"math"
	"sort"
)

type point struct{ x, y float64 }

// binnedFit fits y = a + b·x through the medians of y in up to 20 bins of
// x: medians shrug off the outliers (an interrupt, a preemption) that would
// swamp a fit of raw latencies. r2 is the fit quality over the bins.
func binnedFit(pts []point) (a, b, r2 float64, bins []point) {
	if len(pts) < 2 {
		return 0, 0, 0, nil
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].x < pts[j].x })
	lo, hi := pts[0].x, pts[len(pts)-1].x
	if hi <= lo {
		return 0, 0, 0, nil
	}
	const nbins = 20
	width := (hi - lo) / nbins
	var cur []float64
	curBin := 0
	flush := func() {
		if len(cur) == 0 {
			return
		}
		sort.Float64s(cur)
		x := lo + (float64(curBin)+0.5)*width
		bins = append(bins, point{x, cur[len(cur)/2]})
		cur = cur[:0]
	}
	for _, p := range pts {
		bin := min(int((p.x-lo)/width), nbins-1)
		if bin != curBin {
			flush()
			curBin = bin
		}
		cur = append(cur, p.y)
	}
	flush()
	if len(bins) < 5 {
		return 0, 0, 0, bins
	}
	var sx, sy, sxx, sxy float64
	n := float64(len(bins))
	for _, p := range bins {
		sx += p.x
		sy += p.y
		sxx += p.x * p.x
		sxy += p.x * p.y
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0, 0, 0, bins
	}
	b = (n*sxy - sx*sy) / den
	a = (sy - b*sx) / n
	mean := sy / n
	var ssTot, ssRes float64
	for _, p := range bins {
		ssTot += (p.y - mean) * (p.y - mean)
		r := p.y - (a + b*p.x)
		ssRes += r * r
	}
	if ssTot == 0 {
		return a, b, 0, bins
	}
	return a, b, math.Max(0, 1-ssRes/ssTot), bins
}
