package doctor

import (
	"fmt"
	"sort"
	"strings"
)

// CPUSample is a count of on-CPU samples that share a kernel stack.
type CPUSample struct {
	PID     uint32
	Syscall int32    // in progress when sampled; -1 for none
	Kernel  []string // function names, innermost first; empty in user space
	Count   uint64
}

// OnCPU hands the detectors where the CPUs were during a live run.
func (d *Doctor) OnCPU(samples []CPUSample) { d.env.oncpu = samples }

// Series hands the detectors the kernel's counts read over a live run.
func (d *Doctor) Series(s *Series) { d.env.series = s }

// hotKernel says where the kernel was when sampled inside syscall nr: the
// number of samples, the innermost functions by share, and the stack seen
// most often (innermost first).
func hotKernel(samples []CPUSample, nr uint32) (uint64, []string, []string) {
	var n uint64
	leaf := map[string]uint64{}
	stacks := map[string]uint64{}
	for _, s := range samples {
		if s.Syscall != int32(nr) || len(s.Kernel) == 0 {
			continue
		}
		n += s.Count
		leaf[s.Kernel[0]] += s.Count
		stacks[strings.Join(s.Kernel, "\x00")] += s.Count
	}
	if n == 0 {
		return 0, nil, nil
	}
	names := make([]string, 0, len(leaf))
	for f := range leaf {
		names = append(names, f)
	}
	sort.Slice(names, func(i, j int) bool {
		if leaf[names[i]] != leaf[names[j]] {
			return leaf[names[i]] > leaf[names[j]]
		}
		return names[i] < names[j]
	})
	var funcs []string
	for i, f := range names {
		if i == 5 {
			break
		}
		funcs = append(funcs, fmt.Sprintf("%s (%.0f%%)", f, 100*float64(leaf[f])/float64(n)))
	}
	var top string
	var topN uint64
	for k, v := range stacks {
		if v > topN || (v == topN && k < top) {
			top, topN = k, v
		}
	}
	return n, funcs, strings.Split(top, "\x00")
}
