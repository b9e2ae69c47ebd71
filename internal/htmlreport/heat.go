package htmlreport

import (
	"math/bits"
	"sort"

	"github.com/sysray/sysray/internal/event"
)

// The heatmap's grid. The capture's span is not known until its end, so
// columns start narrow and double in width (merging pairs) whenever an
// event falls past the last one: the grid stays heatCols wide.
const (
	heatCols  = 240
	heatMinNS = 1 << 16 // the first column width
	rowShift  = 7       // row 0: below 2^7 ns (plus half a power)
	heatRows  = 2 * (35 - rowShift)
)

type heat struct {
	t0    uint64
	bin   uint64
	grids map[uint32][]uint32 // by syscall number, heatCols*heatRows counts
	count map[uint32]uint64
	time  map[uint32]uint64
}

func newHeat() heat {
	return heat{bin: heatMinNS, grids: map[uint32][]uint32{}, count: map[uint32]uint64{}, time: map[uint32]uint64{}}
}

// row is a latency's row: two per power of two.
func row(ns uint64) int {
	if ns < 1<<rowShift {
		return 0
	}
	msb := 63 - bits.LeadingZeros64(ns)
	r := 2*(msb-rowShift) + int(ns>>(msb-1)&1)
	return min(r, heatRows-1)
}

func (h *heat) add(nr uint32, t, lat uint64) {
	var col uint64
	if t > h.t0 {
		col = (t - h.t0) / h.bin
	}
	for col >= heatCols {
		h.widen()
		col = (t - h.t0) / h.bin
	}
	g := h.grids[nr]
	if g == nil {
		g = make([]uint32, heatCols*heatRows)
		h.grids[nr] = g
	}
	if i := int(col)*heatRows + row(lat); g[i] < ^uint32(0) {
		g[i]++
	}
	h.count[nr]++
	h.time[nr] += lat
}

// widen doubles the column width.
func (h *heat) widen() {
	h.bin *= 2
	for _, g := range h.grids {
		for c := range heatCols {
			for r := range heatRows {
				var v uint64
				if 2*c < heatCols {
					v = uint64(g[2*c*heatRows+r])
				}
				if 2*c+1 < heatCols {
					v += uint64(g[(2*c+1)*heatRows+r])
				}
				g[c*heatRows+r] = uint32(min(v, uint64(^uint32(0))))
			}
		}
	}
}

// data keeps the syscalls with the most time, each with its own map, and
// an "all syscalls" map of everything.
func (h *heat) data(arch event.Arch, keep int) Heatmap {
	out := Heatmap{BinNS: h.bin, Cols: heatCols}
	for r := range heatRows {
		if r == 0 {
			out.RowNS = append(out.RowNS, 0)
			continue
		}
		msb := r/2 + rowShift
		lo := uint64(1)<<msb + uint64(r%2)<<(msb-1)
		out.RowNS = append(out.RowNS, lo)
	}
	nrs := make([]uint32, 0, len(h.grids))
	for nr := range h.grids {
		nrs = append(nrs, nr)
	}
	sort.Slice(nrs, func(i, j int) bool {
		if h.time[nrs[i]] != h.time[nrs[j]] {
			return h.time[nrs[i]] > h.time[nrs[j]]
		}
		return nrs[i] < nrs[j]
	})
	all := make([]uint64, heatCols*heatRows)
	var allCount, allTime uint64
	for _, nr := range nrs {
		for i, v := range h.grids[nr] {
			all[i] += uint64(v)
		}
		allCount += h.count[nr]
		allTime += h.time[nr]
	}
	out.Series = append(out.Series, Series{Name: "all syscalls", Count: allCount, Time: allTime, Cells: cells(all)})
	for i, nr := range nrs {
		if i == keep {
			out.Others = len(nrs) - keep
			break
		}
		g := make([]uint64, len(h.grids[nr]))
		for j, v := range h.grids[nr] {
			g[j] = uint64(v)
		}
		out.Series = append(out.Series, Series{Name: event.SyscallName(arch, nr), Count: h.count[nr], Time: h.time[nr], Cells: cells(g)})
	}
	return out
}

// cells lists the non-empty cells as (column, row, count) triples.
func cells(g []uint64) []uint64 {
	out := []uint64{}
	for i, v := range g {
		if v > 0 {
			out = append(out, uint64(i/heatRows), uint64(i%heatRows), v)
		}
	}
	return out
}
