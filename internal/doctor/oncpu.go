package doctor

import (
	"fmt"
	"math"
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

// SampleHz is how often a live doctor samples the CPUs: often enough to
// see a kernel path that takes a tenth of a CPU within a few seconds.
const SampleHz = 199

// procCPU is where one process's on-CPU samples fell.
type procCPU struct {
	all  uint64
	byNr map[int32]uint64 // by syscall in progress; -1 outside syscalls
}

func cpuByProc(samples []CPUSample) map[uint32]*procCPU {
	out := map[uint32]*procCPU{}
	for _, s := range samples {
		p := out[s.PID]
		if p == nil {
			p = &procCPU{byNr: map[int32]uint64{}}
			out[s.PID] = p
		}
		p.all += s.Count
		p.byNr[s.Syscall] += s.Count
	}
	return out
}

// Below this many samples a process's CPU share is not used at all: 10
// samples at SampleHz are 50 ms on the CPU, the least thread time any
// share rule trusts (minThreadNS).
const minCPUSamples = 10

// timeShare is the part of a process's time that syscall nr took: its
// share of the threads' lifetimes (in ns), or, where the CPUs were sampled
// and the process was busy on them (a tenth of its thread time), its share
// of the process's CPU samples when the samples show it larger. On a host
// with more runnable threads than CPUs a thread's lifetime is mostly
// waiting for a CPU, which says nothing of where the time it does get
// goes.
//
// "Show it larger" is a test, not a comparison: the samples' share must
// exceed the lifetime share even at its lower bound (sampledFloor). A
// fixed floor of 30 samples did this job before, and failed it:
// with 3 writers on 2 CPUs for half a second the writer that lost the race
// for a CPU had 23 samples, 16 of them in fadvise64 (a share of at least
// 0.49), yet its diluted lifetime share of 0.30 or 0.22 was used, and the
// warning came and went from run to run.
//
// No share is above 1. With budgeted timing (the doctor's, the agent's)
// the time in the call is a weighted sample of its calls' latencies, so in
// a thread that did little else it can come out above the thread's
// lifetime: "unlinkat takes 107% of the time" of an rm -rf, once in four
// runs of the same script.
func timeShare(inNS, threadNS uint64, cpu *procCPU, nr uint32) (share float64, onCPU bool) {
	if threadNS > 0 {
		share = min(1, float64(inNS)/float64(threadNS))
	}
	if cpu == nil || cpu.all < minCPUSamples {
		return share, false
	}
	busyNS := float64(cpu.all) * 1e9 / SampleHz
	if busyNS < 0.1*float64(threadNS) {
		return share, false
	}
	k, n := cpu.byNr[int32(nr)], cpu.all
	if sampledFloor(k, n) > share {
		return float64(k) / float64(n), true
	}
	return share, false
}

// sampledFloor is the least share that k samples in n show with about
// 98% confidence: the lower end of the Wilson score interval at two
// standard errors. Unlike the plain p − 2·sqrt(p(1−p)/n), it stays below
// 1 for a handful of samples that all fell in one place (10 of 10 give
// 0.71, not 1).
func sampledFloor(k, n uint64) float64 {
	if n == 0 {
		return 0
	}
	const z = 2.0
	fn := float64(n)
	p := float64(k) / fn
	c := z * z / fn
	return (p + c/2 - z*math.Sqrt(p*(1-p)/fn+c/(4*fn))) / (1 + c)
}
